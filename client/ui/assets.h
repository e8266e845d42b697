// The dashboard's static files (client/ui/assets/), embedded in the binary
// at build time so that `ranksweep ui` needs nothing on disk and the browser
// loads nothing from a network.
#ifndef RANKSWEEP_CLIENT_UI_ASSETS_H_
#define RANKSWEEP_CLIENT_UI_ASSETS_H_

#include <string_view>
#include <utility>
#include <vector>

namespace ranksweep::client::ui {

// (file name, contents) of every file of client/ui/assets/, sorted by name.
// Defined in the source embed_assets.cmake generates at build time.
const std::vector<std::pair<std::string_view, std::string_view>>& EmbeddedAssets();

}  // namespace ranksweep::client::ui

#endif  // RANKSWEEP_CLIENT_UI_ASSETS_H_
