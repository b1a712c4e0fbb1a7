// `korch store copy SRC DST [--campaign NAME]`: copies campaigns whole
// between stores of either backend (store/copy.hpp).
#include <cstdio>
#include <filesystem>
#include <optional>

#include "store/copy.hpp"
#include "store/store.hpp"
#include "tools/korch/cli.hpp"
#include "util/file_lock.hpp"
#include "util/ids.hpp"

namespace korch::cli {

int cmd_store(const Args& args) {
  constexpr const char* verb = "store copy";
  if (args.positional.size() != 2) {
    return report_failure(verb, ErrorKind::invalid,
                          "expected SRC and DST (a path, sqlite:PATH or postgres://...)");
  }
  const std::string& src_text = args.positional[0];
  const std::string& dst_text = args.positional[1];
  auto src = store::parse_location(src_text);
  if (!src) return report_failure(verb, src.error());
  auto dst = store::parse_location(dst_text);
  if (!dst) return report_failure(verb, dst.error());
  if (src->backend == dst->backend && src->target == dst->target)
    return report_failure(verb, ErrorKind::invalid, "SRC and DST are the same store");
  if (src->backend == store::Backend::sqlite && !std::filesystem::exists(src->target))
    return report_failure(verb, ErrorKind::invalid, src->target + ": no such database");

  // A SQLite destination is locked as korch run locks it: no campaign runs
  // in it meanwhile.
  std::optional<FileLock> lock;
  if (dst->backend == store::Backend::sqlite) {
    auto taken = FileLock::acquire(FileLock::path_for_db(dst->target));
    if (!taken) return report_failure(verb, taken.error());
    lock.emplace(std::move(*taken));
  }
  auto from = store::Store::open(store::Options{.path = src->target, .read_only = true});
  if (!from) return report_failure(verb, from.error());
  auto to = store::Store::open(store::Options{.path = dst->target});
  if (!to) return report_failure(verb, to.error());

  std::string campaign_id;
  if (auto name = args.get("--campaign")) campaign_id = ids::campaign_id(*name);
  auto stats = store::copy_campaigns(**from, **to, campaign_id);
  (*to)->close();
  if (!stats) return report_failure(verb, stats.error());
  std::fprintf(stderr,
               "korch store copy: %lld campaign(s), %lld episode(s), %lld row(s) from %s to %s\n",
               static_cast<long long>(stats->campaigns), static_cast<long long>(stats->episodes),
               static_cast<long long>(stats->rows), store::redact_url(src_text).c_str(),
               store::redact_url(dst_text).c_str());
  return k_exit_ok;
}

}  // namespace korch::cli
