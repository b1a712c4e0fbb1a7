#include "tools/korch/common.hpp"

#include <filesystem>

#include "config/loader.hpp"
#include "store/store.hpp"
#include "util/ids.hpp"

namespace korch::cli {

// Shared by every `korch eval` and `korch audit` of this machine (so identical
// code is never compiled twice). Not under $HOME: the sandboxed workers run as
// an unprivileged user that cannot enter a 0700 home.
std::string default_cache_dir() { return "/var/tmp/korch-cache"; }

Result<std::unique_ptr<store::Store>> open_store_for_reading(const Args& args,
                                                             std::string* campaign_id) {
  std::string db;
  std::string name = args.get("--campaign").value_or("");
  if (auto d = args.get("--db")) {
    db = *d;
  } else if (args.positional.size() == 1) {
    auto loaded =
        config::load_campaign(args.positional[0], config::process_environment(), args.all("--set"));
    if (!loaded) return std::unexpected(loaded.error());
    db = loaded->config.db_path;
    if (name.empty()) name = loaded->config.name;
  } else {
    return fail("give a CAMPAIGN.toml or --db PATH");
  }
  auto location = store::parse_location(db);
  if (!location) return std::unexpected(location.error());
  if (location->backend == store::Backend::sqlite && !std::filesystem::exists(location->target))
    return fail(location->target + ": no such database");
  db = store::redact_url(db);  // what the messages below name
  store::Options so;
  so.path = location->target;  // the file, or the URL itself
  so.read_only = true;
  auto st = store::Store::open(so);
  if (!st) return std::unexpected(st.error());
  if (!name.empty()) {
    *campaign_id = ids::campaign_id(name);
    auto c = (*st)->get_campaign(*campaign_id);
    if (!c) return std::unexpected(c.error());
    if (!*c) return fail(db + ": no campaign named '" + name + "'");
  } else {
    auto all = (*st)->list_campaigns();
    if (!all) return std::unexpected(all.error());
    if (all->size() != 1)
      return fail(db + ": holds " + std::to_string(all->size()) +
                  " campaigns; pick one with --campaign NAME");
    *campaign_id = all->front().id;
  }
  return st;
}

}  // namespace korch::cli
