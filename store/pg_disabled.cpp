// The PostgreSQL backend of a korch built without it (-DKORCH_WITH_POSTGRES=OFF,
// as scripts/gpu/build.sh builds): a postgres:// location is a clear error.
#include <string>

#include "store/store.hpp"
#include "store/work_queue.hpp"

namespace korch::store {

Result<std::unique_ptr<Store>> open_postgres(const Options&, const std::string&) {
  return fail(ErrorKind::invalid,
              "this korch was built without the PostgreSQL backend (-DKORCH_WITH_POSTGRES=OFF); "
              "rebuild it with libpq-dev installed to use a postgres:// store");
}

Result<std::unique_ptr<WorkQueue>> WorkQueue::open(const std::string&, bool) {
  return fail(ErrorKind::invalid,
              "this korch was built without the PostgreSQL backend (-DKORCH_WITH_POSTGRES=OFF); "
              "the evaluation queue needs it");
}

}  // namespace korch::store
