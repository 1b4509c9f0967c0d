// A temporary GGUF path for tests that write models, removed when the test ends. The name
// carries the process id and a tag, so parallel test shards never share a file.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

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

}  // namespace lift::test
