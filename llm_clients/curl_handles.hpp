#pragma once
// Owning wrappers for libcurl handles (module-private: includes curl.h, so
// only llm_clients/*.cpp include it). Each is a std::unique_ptr with the
// matching cleanup function, so a constructor that throws half-way, or an
// early return, releases what was already created.
#include <curl/curl.h>
#include <unistd.h>

#include <memory>

namespace korch::llm::curl {

struct MultiDeleter {
  void operator()(CURLM* h) const { curl_multi_cleanup(h); }
};
struct EasyDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
struct ShareDeleter {
  void operator()(CURLSH* h) const { curl_share_cleanup(h); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
struct UrlDeleter {
  void operator()(CURLU* h) const { curl_url_cleanup(h); }
};
struct StringDeleter {  // strings that libcurl allocated (curl_url_get)
  void operator()(char* s) const { curl_free(s); }
};

using Multi = std::unique_ptr<CURLM, MultiDeleter>;
using Easy = std::unique_ptr<CURL, EasyDeleter>;
using Share = std::unique_ptr<CURLSH, ShareDeleter>;
using Url = std::unique_ptr<CURLU, UrlDeleter>;
using String = std::unique_ptr<char, StringDeleter>;

// A header list. append() keeps the list when libcurl runs out of memory
// (curl_slist_append returns nullptr then and leaves the list as it was).
class Slist {
 public:
  // Returns false when the entry could not be added.
  bool append(const char* entry) {
    curl_slist* grown = curl_slist_append(m_list.get(), entry);
    if (grown == nullptr) return false;
    m_list.release();
    m_list.reset(grown);
    return true;
  }
  curl_slist* get() const { return m_list.get(); }
  bool empty() const { return m_list == nullptr; }

 private:
  std::unique_ptr<curl_slist, SlistDeleter> m_list;
};

// An owned file descriptor (epoll, eventfd), closed once.
class Fd {
 public:
  explicit Fd(int fd = -1) : m_fd(fd) {}
  ~Fd() {
    if (m_fd >= 0) ::close(m_fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return m_fd; }
  bool valid() const { return m_fd >= 0; }

 private:
  int m_fd;
};

}  // namespace korch::llm::curl
