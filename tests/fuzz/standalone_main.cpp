/// A `main` for the fuzz targets without libFuzzer (any compiler, e.g. GCC with ASan + UBSan):
/// runs every input file given (or every file of a directory given), then, with
/// `-max_total_time=N`, mutates those inputs at random for N seconds. It is not coverage
/// guided; it keeps the corpora running as regression tests where libFuzzer is not available,
/// and fuzzes (blindly) the targets that clang cannot build.
///
///     fuzz_<target>_replay [-max_total_time=N] [-seed=S] FILE_OR_DIR...

#include <chrono>       // std::chrono::steady_clock
#include <csignal>      // std::signal, SIGABRT
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint8_t, std::uint64_t
#include <cstdio>       // std::printf, std::fprintf
#include <cstdlib>      // std::strtoull
#include <filesystem>   // std::filesystem::directory_iterator
#include <fstream>      // std::ifstream
#include <iterator>     // std::istreambuf_iterator
#include <random>       // std::mt19937_64
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include <fcntl.h>   // open
#include <unistd.h>  // write, close

#if defined(__has_include)
#if __has_include(<sanitizer/common_interface_defs.h>)
#include <sanitizer/common_interface_defs.h>  // __sanitizer_set_death_callback
#define VBUCKET_FUZZ_HAVE_DEATH_CALLBACK 1
#endif
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The input being run, written to `crash_path` if the process dies on it (sanitizer report or
// a failed check), so a mutated input that fails can be replayed.
std::vector<std::uint8_t> current;
std::string crash_path = "crash-standalone";

void save_current() {
  const int fd = ::open(crash_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  std::size_t done = 0;
  while (done < current.size()) {
    const auto n = ::write(fd, current.data() + done, current.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  static const char note[] = "standalone fuzz driver: the failing input is in the crash file\n";
  (void)!::write(2, note, sizeof note - 1);
}

extern "C" void on_abort(int sig) {
  save_current();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void run(const std::vector<std::uint8_t>& input) {
  // A copy of exactly input.size() bytes, so ASan sees reads past the end.
  current = input;
  LLVMFuzzerTestOneInput(current.data(), current.size());
}

/// One random edit: flip a bit, set a byte to an interesting value, insert, erase, duplicate a
/// range, or splice in part of another input.
void mutate(std::vector<std::uint8_t>& v, const std::vector<std::vector<std::uint8_t>>& corpus,
            std::mt19937_64& rng) {
  auto below = [&](std::size_t n) { return n == 0 ? std::size_t{0} : rng() % n; };
  static constexpr std::uint8_t interesting[] = {0,   1,    0x7f, 0x80, 0xff, '0', '9', '-', ',',
                                                 '"', '\n', '\r', '[',  ']',  '{', '}', ':', '.'};
  switch (rng() % 6) {
    case 0:
      if (!v.empty()) v[below(v.size())] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
      break;
    case 1:
      if (!v.empty()) v[below(v.size())] = interesting[below(std::size(interesting))];
      break;
    case 2:
      v.insert(v.begin() + static_cast<std::ptrdiff_t>(below(v.size() + 1)),
               static_cast<std::uint8_t>(rng()));
      break;
    case 3:
      if (!v.empty()) {
        const std::size_t at = below(v.size());
        const std::size_t n = 1 + below(std::min<std::size_t>(8, v.size() - at));
        v.erase(v.begin() + static_cast<std::ptrdiff_t>(at),
                v.begin() + static_cast<std::ptrdiff_t>(at + n));
      }
      break;
    case 4:
      if (!v.empty() && v.size() < 8192) {
        const std::size_t at = below(v.size());
        const std::size_t n = 1 + below(std::min<std::size_t>(64, v.size() - at));
        const std::vector<std::uint8_t> part(v.begin() + static_cast<std::ptrdiff_t>(at),
                                             v.begin() + static_cast<std::ptrdiff_t>(at + n));
        v.insert(v.begin() + static_cast<std::ptrdiff_t>(below(v.size() + 1)), part.begin(),
                 part.end());
      }
      break;
    default: {
      const auto& other = corpus[below(corpus.size())];
      if (other.empty()) break;
      const std::size_t at = below(other.size());
      v.resize(below(v.size() + 1));
      v.insert(v.end(), other.begin() + static_cast<std::ptrdiff_t>(at), other.end());
      break;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0;
  std::uint64_t seed = 1;
  std::vector<std::vector<std::uint8_t>> corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.rfind("-max_total_time=", 0) == 0) {
      seconds = std::strtod(argv[i] + 16, nullptr);
    } else if (arg.rfind("-seed=", 0) == 0) {
      seed = std::strtoull(argv[i] + 6, nullptr, 10);
    } else if (arg.rfind("-artifact_prefix=", 0) == 0) {
      crash_path = std::string(arg.substr(17)) + "crash-standalone";
    } else if (!arg.empty() && arg[0] == '-') {
      // other libFuzzer flags are accepted and ignored
    } else if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::directory_iterator(arg))
        if (e.is_regular_file()) corpus.push_back(read_bytes(e.path()));
    } else {
      corpus.push_back(read_bytes(arg));
    }
  }
  std::signal(SIGABRT, on_abort);
#ifdef VBUCKET_FUZZ_HAVE_DEATH_CALLBACK
  __sanitizer_set_death_callback(save_current);
#endif
  for (const auto& input : corpus) run(input);
  std::printf("replayed %zu inputs\n", corpus.size());
  if (seconds <= 0) return 0;
  if (corpus.empty()) corpus.emplace_back();
  std::mt19937_64 rng(seed);
  const auto stop = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::uint64_t runs = 0;
  while (std::chrono::steady_clock::now() < stop) {
    for (int k = 0; k < 64; ++k) {
      std::vector<std::uint8_t> v = corpus[rng() % corpus.size()];
      const int edits = 1 + static_cast<int>(rng() % 8);
      for (int e = 0; e < edits; ++e) mutate(v, corpus, rng);
      run(v);
      ++runs;
    }
  }
  std::printf("ran %llu mutated inputs in %.0f s (seed %llu)\n",
              static_cast<unsigned long long>(runs), seconds,
              static_cast<unsigned long long>(seed));
  return 0;
}
