// The real ranksweepd binary with authentication: the `ranksweepd token`
// subcommands, tokens created and revoked while a server runs, the rule that
// --insecure-local needs a loopback address, and TLS with a CA and a server
// certificate made during the test (OpenSSL's C API, no openssl tool).
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <future>
#include <iterator>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"
#include "tests/support/process.h"

namespace ranksweep {
namespace {

using ::ranksweep::testing::CommandResult;
using ::ranksweep::testing::Process;
using ::ranksweep::testing::RunCommand;
using ::ranksweep::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

class RanksweepdAuthTest : public ::testing::Test {
 protected:
  std::string Db() const { return dir_.path() + "/ranksweep.db"; }

  // `ranksweepd token ARGS... --db=DB`.
  CommandResult Token(std::vector<std::string> args) {
    std::vector<std::string> argv = {RANKSWEEPD_BIN, "token"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--db=" + Db());
    return RunCommand(argv, dir_.path() + "/token" + std::to_string(runs_++), 30s);
  }

  std::string Create(const std::string& name, const std::string& role) {
    CommandResult r = Token({"create", "--name", name, "--role", role});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string token = r.out;
    if (!token.empty() && token.back() == '\n') token.pop_back();
    return token;
  }

  // Starts ranksweepd with `flags` on its database; returns the bound
  // address, empty when it did not start.
  std::string Start(std::vector<std::string> flags) {
    std::vector<std::string> argv = {RANKSWEEPD_BIN, "--db=" + Db(), "--lease_seconds=30"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    server_ = std::make_unique<Process>(argv, dir_.path() + "/server" + std::to_string(runs_++));
    auto bound = server_->WaitForStdout(std::regex("listening on (\\S+)"), 30s);
    EXPECT_TRUE(bound.has_value()) << server_->Stderr();
    return bound.value_or("");
  }

  // Stops the server with SIGTERM; its exit code.
  int Stop() {
    server_->Signal(SIGTERM);
    return server_->Wait(30s).value_or(-1);
  }

  static std::unique_ptr<grpc::ClientContext> As(const std::string& token) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + 10s);
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
    return ctx;
  }

  static grpc::Status ListSweeps(const std::shared_ptr<grpc::Channel>& channel,
                                 const std::string& token, v1::ListSweepsResponse* resp) {
    return v1::SweepService::NewStub(channel)->ListSweeps(As(token).get(), v1::ListSweepsRequest(),
                                                          resp);
  }

  // grpc.health.v1.Health/Check through a generic call (no generated code):
  // an empty request; the answer's field 1 is SERVING (1).
  static grpc::Status Health(const std::shared_ptr<grpc::Channel>& channel, bool* serving) {
    grpc::GenericStub stub(channel);
    auto ctx = As("");
    grpc::Slice empty{std::string()};
    grpc::ByteBuffer request(&empty, 1), response;
    std::promise<grpc::Status> done;
    stub.UnaryCall(ctx.get(), "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                   &response, [&](grpc::Status s) { done.set_value(std::move(s)); });
    grpc::Status status = done.get_future().get();
    std::vector<grpc::Slice> slices;
    (void)response.Dump(&slices);
    std::string bytes;
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    *serving = bytes == std::string("\x08\x01", 2);
    return status;
  }

  TempDir dir_;
  int runs_ = 0;
  std::unique_ptr<Process> server_;
};

TEST_F(RanksweepdAuthTest, TokenSubcommandsCreateListAndRevoke) {
  // list and revoke never create a database on a mistyped path.
  CommandResult missing = Token({"list"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("no database at"));
  EXPECT_EQ(Token({"revoke", "--name=alice"}).exit_code, 1);
  EXPECT_FALSE(std::ifstream(Db()).good());

  CommandResult created = Token({"create", "--name", "alice", "--role", "user"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  // stdout is the token and nothing else, so it can go straight to a file.
  std::smatch m;
  ASSERT_TRUE(std::regex_match(created.out, m, std::regex("(rs_[A-Za-z0-9_-]{43})\n")))
      << created.out;
  const std::string alice = m[1];
  EXPECT_THAT(created.err, HasSubstr("shown only this once"));
  const std::string pool = Create("k8s-workers", "worker");
  ASSERT_FALSE(pool.empty());
  EXPECT_NE(pool, alice);

  CommandResult listed = Token({"list"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_TRUE(std::regex_search(
      listed.out, std::regex("^NAME +ROLE +CREATED +REVOKED\n"
                             "alice +user +\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ +-\n"
                             "k8s-workers +worker +\\S+Z +-\n$")))
      << listed.out;
  EXPECT_THAT(listed.out, Not(HasSubstr(alice.substr(3))));

  CommandResult revoked = Token({"revoke", "--name=alice"});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  EXPECT_THAT(revoked.err, HasSubstr("token \"alice\" revoked"));
  revoked = Token({"revoke", "--name=alice"});
  EXPECT_EQ(revoked.exit_code, 0) << revoked.err;
  EXPECT_THAT(revoked.err, HasSubstr("already revoked"));
  listed = Token({"list"});
  EXPECT_TRUE(std::regex_search(listed.out, std::regex("\nalice +user +\\S+Z +\\S+Z\n")))
      << listed.out;

  // Errors (the exit codes of common/exit_codes.h): a taken name 5, bad
  // input 1, each with its message.
  CommandResult dup = Token({"create", "--name=alice", "--role=admin"});
  EXPECT_EQ(dup.exit_code, 5);
  EXPECT_THAT(dup.err, HasSubstr("a token named \"alice\" already exists"));
  EXPECT_EQ(dup.out, "");
  CommandResult bad_role = Token({"create", "--name=carol", "--role=root"});
  EXPECT_EQ(bad_role.exit_code, 1);
  EXPECT_THAT(bad_role.err, HasSubstr("role must be one of admin, user, worker; got \"root\""));
  CommandResult bad_name = Token({"create", "--name=c d", "--role=user"});
  EXPECT_EQ(bad_name.exit_code, 1);
  EXPECT_THAT(bad_name.err, HasSubstr("may contain only"));
  EXPECT_EQ(Token({"create", "--name=carol"}).exit_code, 1);
  EXPECT_EQ(Token({"revoke"}).exit_code, 1);
  EXPECT_EQ(Token({"rotate", "--name=alice"}).exit_code, 1);
  CommandResult unknown = Token({"revoke", "--name=nobody"});
  EXPECT_EQ(unknown.exit_code, 3);
  EXPECT_THAT(unknown.err, HasSubstr("no token named \"nobody\""));

  // The database holds hashes only.
  std::string bytes;
  for (const char* suffix : {"", "-wal"}) {
    std::ifstream in(Db() + suffix, std::ios::binary);
    bytes.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(bytes.find(alice.substr(3)), std::string::npos);
  EXPECT_EQ(bytes.find(pool.substr(3)), std::string::npos);
}

TEST_F(RanksweepdAuthTest, ARunningServerSeesTokensCreatedAndRevokedByTheSubcommand) {
  const std::string addr = Start({"--listen=127.0.0.1:0"});
  ASSERT_FALSE(addr.empty());
  auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  v1::ListSweepsResponse listed;
  EXPECT_EQ(ListSweeps(channel, "", &listed).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Health stays open for probes.
  bool serving = false;
  ASSERT_TRUE(Health(channel, &serving).ok());
  EXPECT_TRUE(serving);

  const std::string alice = Create("alice", "user");
  const std::string pool = Create("pool", "worker");
  ASSERT_TRUE(ListSweeps(channel, alice, &listed).ok());
  EXPECT_EQ(listed.sweeps_size(), 0);
  v1::SubmitSweepRequest submit;
  submit.mutable_spec()->set_name("x");
  v1::SubmitSweepResponse submitted;
  EXPECT_EQ(v1::SweepService::NewStub(channel)
                ->SubmitSweep(As(pool).get(), submit, &submitted)
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  ASSERT_EQ(Token({"revoke", "--name=alice"}).exit_code, 0);
  grpc::Status s = ListSweeps(channel, alice, &listed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message(), "token \"alice\" has been revoked");

  channel.reset();
  EXPECT_EQ(Stop(), 0);
  // Denied calls were logged, the tokens never.
  const std::string log = server_->Stderr();
  EXPECT_THAT(log, HasSubstr("denied /ranksweep.v1.SweepService/ListSweeps"));
  EXPECT_THAT(log, HasSubstr("authentication on: 0 active token(s)"));
  EXPECT_THAT(log, Not(HasSubstr(alice.substr(3))));
  EXPECT_THAT(log, Not(HasSubstr(pool.substr(3))));
}

TEST_F(RanksweepdAuthTest, InsecureLocalIsRefusedOffLoopback) {
  for (const char* listen : {"--listen=0.0.0.0:0", "--listen=[::]:0", "--listen=:0"}) {
    CommandResult r = RunCommand({RANKSWEEPD_BIN, "--db=" + Db(), listen, "--insecure_local"},
                                 dir_.path() + "/refused" + std::to_string(runs_++), 30s);
    EXPECT_EQ(r.exit_code, 1) << listen;
    EXPECT_THAT(r.err, HasSubstr("--insecure-local turns authentication off and is allowed only "
                                 "on a loopback address"))
        << listen;
    EXPECT_EQ(r.out, "") << listen;
  }
}

TEST_F(RanksweepdAuthTest, InsecureLocalServesEveryoneAsTheLocalAdmin) {
  const std::string addr = Start({"--listen=127.0.0.1:0", "--insecure_local"});
  ASSERT_FALSE(addr.empty());
  auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  v1::SubmitSweepRequest submit;
  v1::SweepSpec* spec = submit.mutable_spec();
  spec->set_name("demo");
  spec->mutable_dataset()->set_m(2);
  spec->mutable_dataset()->set_seq_len(3);
  spec->add_heads()->set_kind(v1::HEAD_KIND_SOFTMAX);
  spec->set_seed_count(1);
  v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(
      v1::SweepService::NewStub(channel)->SubmitSweep(As("").get(), submit, &submitted).ok());
  v1::ListSweepsResponse listed;
  ASSERT_TRUE(ListSweeps(channel, "", &listed).ok());
  ASSERT_EQ(listed.sweeps_size(), 1);
  EXPECT_EQ(listed.sweeps(0).owner(), "local");
  channel.reset();
  EXPECT_EQ(Stop(), 0);
  EXPECT_THAT(server_->Stderr(), HasSubstr("--insecure-local: no authentication"));
}

// ------------------------------------------------------------------ TLS

using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using CertPtr = std::unique_ptr<X509, decltype(&X509_free)>;

void AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  ASSERT_NE(ext, nullptr) << value;
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// A P-256 certificate for `cn`, valid for a day, signed by `issuer` (or by
// itself when `issuer` is null: a CA).
CertPtr MakeCert(EVP_PKEY* key, const char* cn, X509* issuer, EVP_PKEY* issuer_key,
                 const char* san) {
  static long serial = 1;
  CertPtr cert(X509_new(), &X509_free);
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn),
                             -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  AddExtension(cert.get(), signer, NID_subject_key_identifier, "hash");
  if (issuer == nullptr) {
    AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    AddExtension(cert.get(), signer, NID_authority_key_identifier, "keyid");
    AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    AddExtension(cert.get(), signer, NID_key_usage, "critical,digitalSignature");
    AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth");
    AddExtension(cert.get(), signer, NID_subject_alt_name, san);
  }
  EXPECT_GT(X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()), 0);
  return cert;
}

std::string Pem(X509* cert) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), &BIO_free);
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string Pem(EVP_PKEY* key) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), &BIO_free);
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

// A CA, and a server certificate it signed for localhost and 127.0.0.1.
struct Pki {
  Pki()
      : ca_key(EVP_EC_gen("P-256"), &EVP_PKEY_free),
        server_key(EVP_EC_gen("P-256"), &EVP_PKEY_free),
        ca(MakeCert(ca_key.get(), "ranksweep test CA", nullptr, nullptr, nullptr)),
        server(MakeCert(server_key.get(), "localhost", ca.get(), ca_key.get(),
                        "DNS:localhost,IP:127.0.0.1")) {}
  KeyPtr ca_key, server_key;
  CertPtr ca, server;
};

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST_F(RanksweepdAuthTest, TlsFlagsAreCheckedAtStartUp) {
  Pki pki, other;
  const std::string cert = dir_.path() + "/server.pem", key = dir_.path() + "/server.key",
                    wrong_key = dir_.path() + "/other.key";
  WriteFile(cert, Pem(pki.server.get()));
  WriteFile(key, Pem(pki.server_key.get()));
  WriteFile(wrong_key, Pem(other.server_key.get()));
  auto start = [&](std::vector<std::string> flags) {
    std::vector<std::string> argv = {RANKSWEEPD_BIN, "--db=" + Db(), "--listen=127.0.0.1:0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return RunCommand(argv, dir_.path() + "/tls" + std::to_string(runs_++), 30s);
  };
  CommandResult r = start({"--tls_cert=" + cert});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--tls-cert and --tls-key go together"));
  r = start({"--tls_cert=" + cert, "--tls_key=" + wrong_key});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--tls-key is not the private key of --tls-cert"));
  r = start({"--tls_cert=" + dir_.path() + "/missing.pem", "--tls_key=" + key});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--tls-cert: cannot read"));
  r = start({"--tls_cert=" + key, "--tls_key=" + key});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--tls-cert: no PEM certificate"));
}

TEST_F(RanksweepdAuthTest, ServesTlsWithACertificateMadeInTheTest) {
  Pki pki, stranger;
  const std::string cert = dir_.path() + "/server.pem", key = dir_.path() + "/server.key";
  WriteFile(cert, Pem(pki.server.get()));
  WriteFile(key, Pem(pki.server_key.get()));
  const std::string admin = Create("ops", "admin");
  const std::string addr =
      Start({"--listen=127.0.0.1:0", "--tls_cert=" + cert, "--tls_key=" + key});
  ASSERT_FALSE(addr.empty());
  EXPECT_THAT(server_->Stderr(), HasSubstr("with TLS"));

  grpc::SslCredentialsOptions trusted;
  trusted.pem_root_certs = Pem(pki.ca.get());
  for (const std::string& target : {addr, "localhost:" + addr.substr(addr.rfind(':') + 1)}) {
    auto channel = grpc::CreateChannel(target, grpc::SslCredentials(trusted));
    v1::ListSweepsResponse listed;
    grpc::Status s = ListSweeps(channel, admin, &listed);
    EXPECT_TRUE(s.ok()) << target << ": " << s.error_message();
    // Inside TLS the token is still required.
    EXPECT_EQ(ListSweeps(channel, "", &listed).error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << target;
  }

  // Plaintext, or a CA the client does not trust: no connection.
  v1::ListSweepsResponse listed;
  auto plain = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  EXPECT_EQ(ListSweeps(plain, admin, &listed).error_code(), grpc::StatusCode::UNAVAILABLE);
  grpc::SslCredentialsOptions untrusted;
  untrusted.pem_root_certs = Pem(stranger.ca.get());
  auto wrong_ca = grpc::CreateChannel(addr, grpc::SslCredentials(untrusted));
  EXPECT_EQ(ListSweeps(wrong_ca, admin, &listed).error_code(), grpc::StatusCode::UNAVAILABLE);
  plain.reset();
  wrong_ca.reset();
  EXPECT_EQ(Stop(), 0);
}

}  // namespace
}  // namespace ranksweep
