// A temporary GGUF path for tests that write models, removed when the test ends. The name
// carries the process id and a tag, so parallel test shards never share a file.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

namespace lift::test {

class TempFile {
 public:
  TempFile(const std::string& prefix, const std::string& tag)
      : path_((std::filesystem::temp_directory_path() /
               (prefix + "-" + std::to_string(::getpid()) + "-" + tag + ".gguf"))
                  .string()) {}
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// For a file written once per process and shared by its tests (a model several tests load):
// removed when the process exits normally.
inline void remove_at_exit(const std::string& path) {
  static std::mutex mu;
  static std::vector<std::string>* paths = nullptr;  // never destroyed: atexit reads it
  std::lock_guard<std::mutex> lock(mu);
  if (paths == nullptr) {
    paths = new std::vector<std::string>;
    std::atexit([] {
      for (const std::string& p : *paths) {
        std::error_code ec;
        std::filesystem::remove(p, ec);
      }
    });
  }
  paths->push_back(path);
}

}  // namespace lift::test
