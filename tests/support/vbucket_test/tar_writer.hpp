#pragma once
/// A tar writer for the FFmpeg adapter's tests (tar.cpp, media_source.cpp): ustar headers, GNU
/// 'L' long names or pax 'x' paths, so that shards of every kind are made without the tar
/// command, and bytes can be mangled at known places.

#include <algorithm>  // std::min
#include <cstdint>    // std::int64_t
#include <cstdio>     // std::snprintf
#include <cstring>    // std::memcpy, std::memset
#include <fstream>    // std::ofstream
#include <string>     // std::string

namespace vbucket_test {

/// A tar writer for the tests: ustar headers, GNU 'L' long names or pax 'x' paths.
struct tar_writer {
  std::string bytes;
  enum class long_names { gnu, pax };

  static void octal(char* field, std::size_t width, std::int64_t v) {
    std::snprintf(field, width, "%0*llo", static_cast<int>(width - 1),
                  static_cast<unsigned long long>(v));
  }
  void header(const std::string& name, std::int64_t size, char type) {
    char h[512] = {};
    std::memcpy(h, name.data(), std::min<std::size_t>(name.size(), 100));
    octal(h + 100, 8, 0644);
    octal(h + 108, 8, 0);
    octal(h + 116, 8, 0);
    octal(h + 124, 12, size);
    octal(h + 136, 12, 0);
    h[156] = type;
    std::memcpy(h + 257, "ustar", 6);
    std::memcpy(h + 263, "00", 2);
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (char c : h) sum += static_cast<unsigned char>(c);
    std::snprintf(h + 148, 8, "%06o", sum);
    bytes.append(h, 512);
  }
  void data(const std::string& d) {
    bytes += d;
    bytes.append((512 - d.size() % 512) % 512, '\0');
  }
  void add(const std::string& name, const std::string& content, long_names how = long_names::gnu) {
    if (name.size() > 100) {
      if (how == long_names::gnu) {
        header("././@LongLink", static_cast<std::int64_t>(name.size() + 1), 'L');
        data(name + '\0');
      } else {
        std::string record = " path=" + name + "\n";
        std::size_t len = record.size() + 2;
        while (std::to_string(len).size() + record.size() != len) ++len;
        record = std::to_string(len) + record;
        header("PaxHeaders/x", static_cast<std::int64_t>(record.size()), 'x');
        data(record);
      }
    }
    header(name, static_cast<std::int64_t>(content.size()), '0');
    data(content);
  }
  /// A member with a pax `path` record whatever its name, and in the ustar name field what
  /// Python's tarfile (hence webdataset's TarWriter) writes there: '?' for each non-ASCII
  /// character, cut to 100 bytes.
  void add_pax(const std::string& name, const std::string& content) {
    std::string record = " path=" + name + "\n";
    std::size_t len = record.size() + 2;
    while (std::to_string(len).size() + record.size() != len) ++len;
    record = std::to_string(len) + record;
    header("PaxHeader/x", static_cast<std::int64_t>(record.size()), 'x');
    data(record);
    std::string ascii;
    for (std::size_t i = 0; i < name.size(); ++i) {
      const auto c = static_cast<unsigned char>(name[i]);
      if (c < 0x80) {
        ascii += name[i];
      } else if ((c & 0xC0) != 0x80) {
        ascii += '?';  // one per character: continuation bytes add nothing
      }
    }
    header(ascii.substr(0, 100), static_cast<std::int64_t>(content.size()), '0');
    data(content);
  }
  void directory(const std::string& name) { header(name, 0, '5'); }
  void end() { bytes.append(1024, '\0'); }
  void save(const std::string& path) const {
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
};

}  // namespace vbucket_test
