#pragma once
// A temporary directory for one test, removed with everything in it when the
// object goes out of scope. Created under $TMPDIR (or /tmp) as
// korch-test-XXXXXX. Use it as a fixture member:
//   class MyTest : public ::testing::Test { protected: korch::testing::TempDir m_dir; };
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace korch::testing {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/korch-test-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("TempDir: mkdtemp failed for " + pattern);
    m_path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return m_path; }
  // `name` inside the directory (not created).
  std::filesystem::path file(const std::string& name) const { return m_path / name; }
  // Writes `text` to `name` (creating its folders) and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    auto p = m_path / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }

 private:
  std::filesystem::path m_path;
};

}  // namespace korch::testing
