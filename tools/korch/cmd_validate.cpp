// korch tasks validate (filled in with the evaluator's task checks).
#include <cstdio>

#include "config/tasks.hpp"
#include "tools/korch/cli.hpp"

namespace korch::cli {

int cmd_tasks_validate(const Args& args, const std::vector<config::Task>& tasks) {
  std::fprintf(stderr, "korch tasks validate: not wired yet\n");
  return k_exit_error;
}

}  // namespace korch::cli
