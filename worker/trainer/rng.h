// A small, portable pseudo-random generator for everything the trainer draws
// by itself (datasets, initial weights, minibatch order).
//
// std::mt19937_64 is portable but the std distributions are not (their
// algorithms are implementation-defined), and Torch's generators differ
// between versions and devices. SplitMix64 with our own bounded and Gaussian
// draws gives the same numbers on every platform, LibTorch version and
// device, which is what "same spec and seed, same numbers" needs.
//
// Thread-safety: an Rng is a value; do not share one between threads.
#ifndef RANKSWEEP_WORKER_TRAINER_RNG_H_
#define RANKSWEEP_WORKER_TRAINER_RNG_H_

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace ranksweep::trainer {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  // Derives an independent stream from a seed and a purpose tag, so that
  // e.g. the initial weights of seed 3 never depend on how many other seeds
  // train beside it.
  static Rng ForStream(uint64_t seed, uint64_t tag) {
    Rng mixer(seed ^ (tag * 0x9E3779B97F4A7C15ULL));
    mixer.Next();
    return Rng(mixer.Next() ^ tag);
  }

  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, n), n >= 1, without modulo bias.
  uint64_t Below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
      x = Next();
    } while (x >= limit);
    return x % n;
  }

  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Standard normal (Box-Muller; one value per call, the second is dropped
  // so the stream position does not depend on call history parity).
  double Normal() {
    double u1 = Uniform();
    while (u1 <= 0.0) u1 = Uniform();
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) {
      std::swap(v[i - 1], v[Below(i)]);
    }
  }

 private:
  uint64_t state_;
};

// Stream tags: one per purpose, so streams never overlap by accident.
inline constexpr uint64_t kStreamData = 1;
inline constexpr uint64_t kStreamInit = 2;
inline constexpr uint64_t kStreamBatches = 3;

}  // namespace ranksweep::trainer

#endif  // RANKSWEEP_WORKER_TRAINER_RNG_H_
