#pragma once
// Helpers shared by the subcommands.
#include <memory>
#include <string>

#include "config/campaign.hpp"
#include "store/store.hpp"
#include "tools/korch/cli.hpp"
#include "util/error.hpp"

namespace korch::cli {

// Opens the store named by `--db PATH` or by the config file given as the
// only positional argument, read-only. Sets *campaign_id to the campaign
// selected by --campaign NAME, the config's name, or the only campaign.
Result<std::unique_ptr<store::Store>> open_store_for_reading(const Args& args,
                                                             std::string* campaign_id);

// The exit kind of an open_store_for_reading() failure: `unavailable` when
// the store could not be reached (a PostgreSQL server that is down or
// refuses the connection: the input may be right), else `invalid` (a bad
// path, URL, config or campaign name).
inline ErrorKind store_open_failure_kind(const Error& e) {
  return e.kind == ErrorKind::unavailable ? ErrorKind::unavailable : ErrorKind::invalid;
}

}  // namespace korch::cli
