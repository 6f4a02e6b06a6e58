#pragma once
/// Per-sample fields: named metadata columns (captions, scores, paths of cached tensors)
/// that ride with each batch of a `loader`, gathered on its worker threads by the samples the
/// batch actually holds (a substituted clip's fields are its substitute's).
///
///   - *Strings* are stored once: one contiguous buffer and n + 1 offsets; a batch gets its own
///     small buffer and offsets, gathered by index.
///   - *Numbers* are a typed column (bool, int8…64, uint8…64, float16/32/64, bfloat16); a batch
///     gets the values of its samples, packed.
///   - *Tensor files* are a column of paths to `.npy` or `.safetensors` files (precomputed
///     latents, text embeddings); each clip's file is read on the worker that handles the clip
///     (a file that cannot be read is a failure of that clip, replaced like a failed decode), and
///     the batch gets them stacked (B × the files' shape; every file of a batch must have the
///     same shape and dtype, else an error naming the file and both shapes).
///
/// Columns come from arrays (`add_strings`, `add_numbers`, `add_tensor_files`) or from the
/// trainer's own records through a projection (`add_column`):
///
///     vbucket::field_table fields(records.size());
///     fields.add_column("caption", records, [](const clip& c) { return c.caption; });
///     fields.add_column("aesthetic", records, [](const clip& c) { return c.aesthetic; });
///     vbucket::loader loader(sampler, decoder, ring, {.fields = share(std::move(fields))});
///     for (auto& b : loader) b.fields.text_of("caption").at(0);

#include <bit>          // std::endian
#include <concepts>     // std::integral, std::floating_point
#include <cstddef>      // std::size_t, std::byte
#include <cstdint>      // std::int64_t, std::uint64_t
#include <cstdio>       // std::FILE, std::fopen, std::fread
#include <cstring>      // std::memcpy
#include <limits>       // std::numeric_limits
#include <memory>       // std::unique_ptr
#include <optional>     // std::optional
#include <ranges>       // std::ranges::random_access_range
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <type_traits>  // std::is_same_v, std::invoke_result_t
#include <utility>      // std::move
#include <vector>       // std::vector

#include "error.hpp"

namespace vbucket {

/// The element type of a number column or a tensor (little-endian in memory).
enum class field_dtype : std::uint8_t {
  boolean,
  i8,
  i16,
  i32,
  i64,
  u8,
  u16,
  u32,
  u64,
  f16,
  bf16,
  f32,
  f64
};

constexpr std::size_t field_dtype_size(field_dtype t) noexcept {
  switch (t) {
    case field_dtype::boolean:
    case field_dtype::i8:
    case field_dtype::u8:
      return 1;
    case field_dtype::i16:
    case field_dtype::u16:
    case field_dtype::f16:
    case field_dtype::bf16:
      return 2;
    case field_dtype::i32:
    case field_dtype::u32:
    case field_dtype::f32:
      return 4;
    case field_dtype::i64:
    case field_dtype::u64:
    case field_dtype::f64:
      return 8;
  }
  return 1;
}

/// NumPy's / PyTorch's name of the type ("float32", "bfloat16", "bool", …).
constexpr const char* field_dtype_name(field_dtype t) noexcept {
  constexpr const char* names[] = {"bool",     "int8",    "int16",  "int32",  "int64",
                                   "uint8",    "uint16",  "uint32", "uint64", "float16",
                                   "bfloat16", "float32", "float64"};
  return names[static_cast<std::size_t>(t)];
}

/// The dtype of a C++ arithmetic type (for `add_numbers` and `add_column`).
template <class T>
constexpr field_dtype field_dtype_of() noexcept {
  if constexpr (std::is_same_v<T, bool>)
    return field_dtype::boolean;
  else if constexpr (std::floating_point<T>)
    return sizeof(T) == 4 ? field_dtype::f32 : field_dtype::f64;
  else if constexpr (std::signed_integral<T>)
    return sizeof(T) == 1   ? field_dtype::i8
           : sizeof(T) == 2 ? field_dtype::i16
           : sizeof(T) == 4 ? field_dtype::i32
                            : field_dtype::i64;
  else
    return sizeof(T) == 1   ? field_dtype::u8
           : sizeof(T) == 2 ? field_dtype::u16
           : sizeof(T) == 4 ? field_dtype::u32
                            : field_dtype::u64;
}

/// A tensor: C-order bytes of `shape` elements of `dtype`.
struct field_tensor {
  field_dtype dtype = field_dtype::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> data;

  [[nodiscard]] std::size_t elements() const noexcept {
    std::size_t n = 1;
    for (const auto d : shape) n *= static_cast<std::size_t>(d);
    return n;
  }
};

/// "(2, 3)" for messages.
VBUCKET_COMPILED_INLINE std::string shape_text(std::span<const std::int64_t> shape);
/// Reads a `.npy` file (format versions 1, 2 and 3) into `out`; nullopt on success, else a
/// message naming the file (not a .npy file, Fortran order, an unsupported or big-endian dtype,
/// truncated data).
VBUCKET_COMPILED_INLINE std::optional<std::string> read_npy(const std::string& path,
                                                            field_tensor& out);
/// Reads one tensor of a `.safetensors` file into `out`: the one named `name`, or the file's
/// only tensor. nullopt on success, else a message naming the file.
VBUCKET_COMPILED_INLINE std::optional<std::string> read_safetensors(const std::string& path,
                                                                    std::string_view name,
                                                                    field_tensor& out);
/// A tensor file by its extension: `.npy`, or `.safetensors` (the tensor named `name`, or the
/// file's only one).
VBUCKET_COMPILED_INLINE std::optional<std::string> read_tensor_file(const std::string& path,
                                                                    std::string_view name,
                                                                    field_tensor& out);

/// One batch's fields, column by column in the table's order within each kind.
struct batch_fields {
  struct text_column {
    std::string name;
    std::string chars;                   ///< the batch's strings back to back
    std::vector<std::uint64_t> offsets;  ///< n + 1
    [[nodiscard]] std::size_t size() const noexcept {
      return offsets.empty() ? 0 : offsets.size() - 1;
    }
    [[nodiscard]] std::string_view at(std::size_t i) const noexcept {
      return std::string_view(chars).substr(offsets[i], offsets[i + 1] - offsets[i]);
    }
  };
  struct number_column {
    std::string name;
    field_dtype dtype = field_dtype::f64;
    std::vector<std::byte> data;  ///< n values
    template <class T>
    [[nodiscard]] T at(std::size_t i) const noexcept {
      T v{};
      std::memcpy(&v, data.data() + i * sizeof(T), sizeof(T));
      return v;
    }
  };
  struct tensor_column {
    std::string name;
    field_tensor stacked;  ///< shape B × the files' shape
  };
  std::vector<text_column> text;
  std::vector<number_column> numbers;
  std::vector<tensor_column> tensors;

  /// The column named `name`; throws `vbucket::error` when there is none.
  [[nodiscard]] const text_column& text_of(std::string_view name) const { return find(text, name); }
  [[nodiscard]] const number_column& numbers_of(std::string_view name) const {
    return find(numbers, name);
  }
  [[nodiscard]] const tensor_column& tensors_of(std::string_view name) const {
    return find(tensors, name);
  }

 private:
  template <class C>
  static const C& find(const std::vector<C>& cols, std::string_view name) {
    for (const C& c : cols)
      if (c.name == name) return c;
    throw error("batch fields: no column \"" + std::string(name) + "\" of this kind");
  }
};

/// The per-sample columns of a metadata table (`rows` samples), for the loader.
class field_table {
 public:
  explicit field_table(std::size_t rows) : rows_(rows) {}

  [[nodiscard]] std::size_t rows() const noexcept { return rows_; }
  [[nodiscard]] bool has_tensors() const noexcept { return !tensors_.empty(); }
  [[nodiscard]] bool empty() const noexcept {
    return text_.empty() && numbers_.empty() && tensors_.empty();
  }

  /// A string column as one buffer and `rows() + 1` nondecreasing offsets into it.
  VBUCKET_COMPILED_INLINE void add_strings(std::string name, std::string chars,
                                           std::vector<std::uint64_t> offsets);
  VBUCKET_COMPILED_INLINE void add_strings(std::string name, std::span<const std::string> values);

  /// A number column: `rows()` values of `dtype`, little-endian bytes.
  VBUCKET_COMPILED_INLINE void add_numbers(std::string name, field_dtype dtype,
                                           std::vector<std::byte> values);
  template <class T>
    requires std::is_arithmetic_v<T>
  void add_numbers(std::string name, std::span<const T> values) {
    std::vector<std::byte> bytes(values.size_bytes());
    if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    add_numbers(std::move(name), field_dtype_of<T>(), std::move(bytes));
  }

  /// A column of tensor files (`.npy`, `.safetensors`), one per row, read per clip.
  VBUCKET_COMPILED_INLINE void add_tensor_files(std::string name,
                                                std::span<const std::string> paths);

  /// A column from the trainer's records: `project(record)` is a string (text column) or a
  /// number (number column).
  template <std::ranges::random_access_range Records, class Project>
  void add_column(std::string name, const Records& records, Project project) {
    using V = std::remove_cvref_t<
        std::invoke_result_t<Project&, std::ranges::range_reference_t<const Records>>>;
    if constexpr (std::is_arithmetic_v<V>) {
      std::vector<V> values;
      values.reserve(std::ranges::size(records));
      for (const auto& r : records) values.push_back(project(r));
      check_rows(name, values.size());
      add_numbers<V>(std::move(name), std::span<const V>(values));
    } else {
      static_assert(std::is_convertible_v<V, std::string_view>,
                    "add_column: the projection must return a number or a string");
      std::string chars;
      std::vector<std::uint64_t> offsets{0};
      for (const auto& r : records) {
        chars += std::string_view(project(r));
        offsets.push_back(chars.size());
      }
      check_rows(name, offsets.size() - 1);
      add_strings(std::move(name), std::move(chars), std::move(offsets));
    }
  }

  /// The tensor file of `sample` in tensor column `c`.
  [[nodiscard]] std::string tensor_path(std::size_t c, std::uint32_t sample) const {
    const auto& t = tensors_[c];
    return t.chars.substr(t.offsets[sample], t.offsets[sample + 1] - t.offsets[sample]);
  }

  /// Reads `sample`'s tensor files (one per tensor column) into `out`; nullopt on success, else
  /// the message naming the file. Thread-safe.
  VBUCKET_COMPILED_INLINE std::optional<std::string> read_tensors(
      std::uint32_t sample, std::vector<field_tensor>& out) const;

  /// The fields of `samples`: strings and numbers gathered, and `per_clip` (each clip's
  /// tensors from `read_tensors`) stacked. Throws `vbucket::error` naming both files and shapes
  /// when two tensors of one column differ in shape or dtype.
  [[nodiscard]] VBUCKET_COMPILED_INLINE batch_fields
  gather(std::span<const std::uint32_t> samples,
         std::span<std::vector<field_tensor>> per_clip = {}) const;

 private:
  struct strings {
    std::string name;
    std::string chars;
    std::vector<std::uint64_t> offsets;
  };
  struct numbers {
    std::string name;
    field_dtype dtype;
    std::vector<std::byte> data;
  };

  VBUCKET_COMPILED_INLINE void check_name(const std::string& name) const;
  VBUCKET_COMPILED_INLINE void check_rows(const std::string& name, std::size_t n) const;
  VBUCKET_COMPILED_INLINE std::pair<std::string, std::vector<std::uint64_t>> pack(
      std::span<const std::string> values, const std::string& name) const;

  std::size_t rows_;
  std::vector<strings> text_;
  std::vector<numbers> numbers_;
  std::vector<strings> tensors_;
};

#if VBUCKET_HEADER_DEFINITIONS
/// "(2, 3)" for messages.
VBUCKET_COMPILED_INLINE std::string shape_text(std::span<const std::int64_t> shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

namespace detail {

struct file_closer {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};

/// The whole file, or an error naming it.
inline std::optional<std::string> read_whole_file(const std::string& path,
                                                  std::vector<std::byte>& out) {
  std::unique_ptr<std::FILE, file_closer> f(std::fopen(path.c_str(), "rb"));
  if (!f) return path + ": cannot open";
  out.clear();
  std::byte chunk[1 << 16];
  while (true) {
    const std::size_t got = std::fread(chunk, 1, sizeof chunk, f.get());
    out.insert(out.end(), chunk, chunk + got);
    if (got < sizeof chunk) break;
  }
  if (std::ferror(f.get())) return path + ": read error";
  return std::nullopt;
}

/// NumPy's `descr` ("<f4", "|u1", "<i8", "|b1", "<f2") as a dtype; nullopt when unsupported.
inline std::optional<field_dtype> npy_dtype(std::string_view d) {
  if (d.size() < 3) return std::nullopt;
  const char order = d[0];
  const std::string_view code = d.substr(1);
  const bool one_byte = code == "u1" || code == "i1" || code == "b1";
  if (!(order == '<' || order == '|' ||
        (order == '=' && std::endian::native == std::endian::little)))
    return std::nullopt;
  if (order == '|' && !one_byte) return std::nullopt;
  constexpr std::pair<std::string_view, field_dtype> table[] = {
      {"b1", field_dtype::boolean}, {"i1", field_dtype::i8},  {"i2", field_dtype::i16},
      {"i4", field_dtype::i32},     {"i8", field_dtype::i64}, {"u1", field_dtype::u8},
      {"u2", field_dtype::u16},     {"u4", field_dtype::u32}, {"u8", field_dtype::u64},
      {"f2", field_dtype::f16},     {"f4", field_dtype::f32}, {"f8", field_dtype::f64}};
  for (const auto& [name, t] : table)
    if (code == name) return t;
  return std::nullopt;
}

/// The value of `key` in the header dict of a .npy file (the text after "'key':"), trimmed up
/// to the next top-level comma or closing brace.
inline std::optional<std::string_view> npy_header_value(std::string_view h, std::string_view key) {
  for (const char q : {'\'', '"'}) {
    const std::string k = std::string(1, q) + std::string(key) + std::string(1, q);
    const auto at = h.find(k);
    if (at == std::string_view::npos) continue;
    auto p = h.find(':', at + k.size());
    if (p == std::string_view::npos) return std::nullopt;
    ++p;
    while (p < h.size() && h[p] == ' ') ++p;
    std::size_t e = p;
    int depth = 0;
    while (e < h.size()) {
      const char c = h[e];
      if (c == '(' || c == '[') ++depth;
      if (c == ')' || c == ']') --depth;
      if (depth == 0 && (c == ',' || c == '}')) break;
      if (depth < 0) break;
      ++e;
    }
    std::string_view v = h.substr(p, e - p);
    while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
    return v;
  }
  return std::nullopt;
}

/// "(2, 3)", "(5,)", "()" as dimensions; nullopt when malformed.
inline std::optional<std::vector<std::int64_t>> npy_shape(std::string_view v) {
  if (v.size() < 2 || v.front() != '(' || v.back() != ')') return std::nullopt;
  v = v.substr(1, v.size() - 2);
  std::vector<std::int64_t> dims;
  std::size_t p = 0;
  while (p < v.size()) {
    while (p < v.size() && (v[p] == ' ' || v[p] == ',')) ++p;
    if (p >= v.size()) break;
    std::int64_t d = 0;
    std::size_t digits = 0;
    while (p < v.size() && v[p] >= '0' && v[p] <= '9') {
      if (d > (std::int64_t{1} << 48)) return std::nullopt;
      d = d * 10 + (v[p] - '0');
      ++p;
      ++digits;
    }
    if (digits == 0) return std::nullopt;
    dims.push_back(d);
  }
  return dims;
}

/// Checks that `shape` × the element size fits in `available` bytes.
inline std::optional<std::string> check_tensor_bytes(const std::string& path, const field_tensor& t,
                                                     std::size_t available) {
  std::size_t n = field_dtype_size(t.dtype);
  for (const auto d : t.shape) {
    if (d < 0 || (d > 0 && n > (std::size_t{1} << 50) / static_cast<std::size_t>(d)))
      return path + ": shape " + shape_text(t.shape) + " is too large";
    n *= static_cast<std::size_t>(d);
  }
  if (n > available)
    return path + ": truncated: shape " + shape_text(t.shape) + " of " + field_dtype_name(t.dtype) +
           " needs " + std::to_string(n) + " bytes of data, the file has " +
           std::to_string(available);
  return std::nullopt;
}

/// A minimal JSON reader for the safetensors header: objects, arrays, strings, numbers.
class json_cursor {
 public:
  explicit json_cursor(std::string_view s) : s_(s) {}
  void ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\n' || s_[p_] == '\r' || s_[p_] == '\t'))
      ++p_;
  }
  bool eat(char c) {
    ws();
    if (p_ < s_.size() && s_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  [[nodiscard]] char peek() {
    ws();
    return p_ < s_.size() ? s_[p_] : '\0';
  }
  std::optional<std::string> string() {
    if (!eat('"')) return std::nullopt;
    std::string out;
    while (p_ < s_.size() && s_[p_] != '"') {
      if (s_[p_] == '\\') {
        if (++p_ >= s_.size()) return std::nullopt;
        const char e = s_[p_];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e;  // \uXXXX kept as is: names only
      } else {
        out += s_[p_];
      }
      ++p_;
    }
    if (p_ >= s_.size()) return std::nullopt;
    ++p_;
    return out;
  }
  std::optional<std::int64_t> integer() {
    ws();
    std::int64_t v = 0;
    std::size_t digits = 0;
    while (p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9') {
      if (v > (std::int64_t{1} << 58)) return std::nullopt;
      v = v * 10 + (s_[p_++] - '0');
      ++digits;
    }
    if (digits == 0) return std::nullopt;
    return v;
  }
  /// Skips any value.
  bool skip() {
    const char c = peek();
    if (c == '"') return string().has_value();
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++p_;
      if (eat(close)) return true;
      do {
        if (c == '{' && (!string() || !eat(':'))) return false;
        if (!skip()) return false;
      } while (eat(','));
      return eat(close);
    }
    const std::size_t start = p_;
    while (p_ < s_.size() && s_[p_] != ',' && s_[p_] != '}' && s_[p_] != ']') ++p_;
    return p_ > start;
  }
  [[nodiscard]] bool at_end() {
    ws();
    return p_ == s_.size();
  }

 private:
  std::string_view s_;
  std::size_t p_ = 0;
};

inline std::optional<field_dtype> safetensors_dtype(std::string_view d) {
  constexpr std::pair<std::string_view, field_dtype> table[] = {
      {"BOOL", field_dtype::boolean}, {"I8", field_dtype::i8},     {"I16", field_dtype::i16},
      {"I32", field_dtype::i32},      {"I64", field_dtype::i64},   {"U8", field_dtype::u8},
      {"U16", field_dtype::u16},      {"U32", field_dtype::u32},   {"U64", field_dtype::u64},
      {"F16", field_dtype::f16},      {"BF16", field_dtype::bf16}, {"F32", field_dtype::f32},
      {"F64", field_dtype::f64}};
  for (const auto& [name, t] : table)
    if (d == name) return t;
  return std::nullopt;
}

}  // namespace detail

/// Reads a `.npy` file (format versions 1, 2 and 3) into `out`; nullopt on success, else a
/// message naming the file (not a .npy file, Fortran order, an unsupported or big-endian dtype,
/// truncated data).
VBUCKET_COMPILED_INLINE std::optional<std::string> read_npy(const std::string& path,
                                                            field_tensor& out) {
  std::vector<std::byte> bytes;
  if (auto e = detail::read_whole_file(path, bytes)) return e;
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 10 || b[0] != 0x93 ||
      std::string_view(reinterpret_cast<const char*>(b + 1), 5) != "NUMPY")
    return path + ": not a .npy file (no \\x93NUMPY magic)";
  const unsigned major = b[6];
  std::size_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len = b[8] | (std::size_t{b[9]} << 8);
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return path + ": truncated .npy header";
    header_len =
        b[8] | (std::size_t{b[9]} << 8) | (std::size_t{b[10]} << 16) | (std::size_t{b[11]} << 24);
    header_at = 12;
  } else {
    return path + ": unsupported .npy format version " + std::to_string(major);
  }
  if (header_at + header_len > bytes.size()) return path + ": truncated .npy header";
  const std::string_view h(reinterpret_cast<const char*>(b + header_at), header_len);
  const auto descr = detail::npy_header_value(h, "descr");
  const auto fortran = detail::npy_header_value(h, "fortran_order");
  const auto shape = detail::npy_header_value(h, "shape");
  if (!descr || !fortran || !shape)
    return path +
           ": malformed .npy header (needs descr, fortran_order and shape): " + std::string(h);
  if (*fortran != "False")
    return path +
           ": Fortran-order arrays are not supported (save it C-contiguous: "
           "np.save(path, np.ascontiguousarray(a)))";
  std::string_view d = *descr;
  if (d.size() >= 2 && (d.front() == '\'' || d.front() == '"')) d = d.substr(1, d.size() - 2);
  const auto dtype = detail::npy_dtype(d);
  if (!dtype)
    return path + ": unsupported dtype '" + std::string(d) +
           "' (supported: little-endian bool, int8-64, uint8-64, float16/32/64)";
  const auto dims = detail::npy_shape(*shape);
  if (!dims) return path + ": malformed shape " + std::string(*shape) + " in the .npy header";
  out.dtype = *dtype;
  out.shape = *dims;
  const std::size_t data_at = header_at + header_len;
  if (auto e = detail::check_tensor_bytes(path, out, bytes.size() - data_at)) return e;
  const std::size_t n = out.elements() * field_dtype_size(out.dtype);
  out.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(data_at),
                  bytes.begin() + static_cast<std::ptrdiff_t>(data_at + n));
  return std::nullopt;
}

/// Reads one tensor of a `.safetensors` file into `out`: the one named `name`, or the file's
/// only tensor. nullopt on success, else a message naming the file.
VBUCKET_COMPILED_INLINE std::optional<std::string> read_safetensors(const std::string& path,
                                                                    std::string_view name,
                                                                    field_tensor& out) {
  std::vector<std::byte> bytes;
  if (auto e = detail::read_whole_file(path, bytes)) return e;
  if (bytes.size() < 8) return path + ": not a safetensors file (shorter than 8 bytes)";
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | std::to_integer<std::uint64_t>(bytes[static_cast<std::size_t>(i)]);
  if (n > bytes.size() - 8)
    return path + ": not a safetensors file (header of " + std::to_string(n) +
           " bytes in a file of " + std::to_string(bytes.size()) + ")";
  const std::string_view h(reinterpret_cast<const char*>(bytes.data()) + 8,
                           static_cast<std::size_t>(n));
  const std::size_t data_at = 8 + static_cast<std::size_t>(n);
  struct entry {
    std::string key, dtype;
    std::vector<std::int64_t> shape;
    std::int64_t begin = -1, end = -1;
  };
  std::vector<entry> entries;
  detail::json_cursor c(h);
  const std::string bad = path + ": malformed safetensors header";
  if (!c.eat('{')) return bad;
  if (!c.eat('}')) {
    do {
      auto key = c.string();
      if (!key || !c.eat(':')) return bad;
      if (*key == "__metadata__") {
        if (!c.skip()) return bad;
        continue;
      }
      entry e;
      e.key = *key;
      if (!c.eat('{')) return bad;
      do {
        auto field = c.string();
        if (!field || !c.eat(':')) return bad;
        if (*field == "dtype") {
          auto v = c.string();
          if (!v) return bad;
          e.dtype = *v;
        } else if (*field == "shape" || *field == "data_offsets") {
          std::vector<std::int64_t> v;
          if (!c.eat('[')) return bad;
          if (!c.eat(']')) {
            do {
              auto x = c.integer();
              if (!x) return bad;
              v.push_back(*x);
            } while (c.eat(','));
            if (!c.eat(']')) return bad;
          }
          if (*field == "shape") {
            e.shape = std::move(v);
          } else {
            if (v.size() != 2) return bad + " (data_offsets of " + e.key + ")";
            e.begin = v[0];
            e.end = v[1];
          }
        } else if (!c.skip()) {
          return bad;
        }
      } while (c.eat(','));
      if (!c.eat('}')) return bad;
      entries.push_back(std::move(e));
    } while (c.eat(','));
    if (!c.eat('}')) return bad;
  }
  const entry* pick = nullptr;
  for (const entry& e : entries)
    if (e.key == name) pick = &e;
  if (pick == nullptr && entries.size() == 1) pick = &entries[0];
  if (pick == nullptr) {
    std::string names;
    for (const entry& e : entries) names += (names.empty() ? "" : ", ") + e.key;
    return path + ": " + std::to_string(entries.size()) + " tensors (" + names +
           "), none named \"" + std::string(name) + "\"";
  }
  const auto dtype = detail::safetensors_dtype(pick->dtype);
  if (!dtype) return path + ": tensor " + pick->key + ": unsupported dtype " + pick->dtype;
  out.dtype = *dtype;
  out.shape = pick->shape;
  // A shape whose element count overflows (or is negative) is refused before it is multiplied.
  if (auto e = detail::check_tensor_bytes(path + ": tensor " + pick->key, out,
                                          std::numeric_limits<std::size_t>::max()))
    return e;
  const std::size_t size = out.elements() * field_dtype_size(out.dtype);
  if (pick->begin < 0 || pick->end < pick->begin ||
      static_cast<std::size_t>(pick->end) > bytes.size() - data_at ||
      static_cast<std::size_t>(pick->end - pick->begin) != size)
    return path + ": tensor " + pick->key + ": data_offsets [" + std::to_string(pick->begin) +
           ", " + std::to_string(pick->end) + "] do not hold shape " + shape_text(out.shape) +
           " of " + field_dtype_name(out.dtype) + " in " + std::to_string(bytes.size() - data_at) +
           " bytes of data";
  const auto from = static_cast<std::ptrdiff_t>(data_at + static_cast<std::size_t>(pick->begin));
  out.data.assign(bytes.begin() + from, bytes.begin() + from + static_cast<std::ptrdiff_t>(size));
  return std::nullopt;
}

/// A tensor file by its extension: `.npy`, or `.safetensors` (the tensor named `name`, or the
/// file's only one).
VBUCKET_COMPILED_INLINE std::optional<std::string> read_tensor_file(const std::string& path,
                                                                    std::string_view name,
                                                                    field_tensor& out) {
  const auto ends = [&](std::string_view ext) {
    return path.size() >= ext.size() &&
           path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  };
  if (ends(".npy")) return read_npy(path, out);
  if (ends(".safetensors")) return read_safetensors(path, name, out);
  return path + ": not a tensor file (expected .npy or .safetensors)";
}

VBUCKET_COMPILED_INLINE void field_table::add_strings(std::string name, std::string chars,
                                                      std::vector<std::uint64_t> offsets) {
  check_name(name);
  if (offsets.size() != rows_ + 1)
    throw error("fields: column \"" + name + "\" has " + std::to_string(offsets.size()) +
                " offsets for " + std::to_string(rows_) + " rows (need rows + 1)");
  for (std::size_t i = 0; i < rows_; ++i)
    if (offsets[i] > offsets[i + 1] || offsets[i + 1] > chars.size())
      throw error("fields: column \"" + name + "\": offsets of row " + std::to_string(i) +
                  " are not within its buffer");
  text_.push_back({std::move(name), std::move(chars), std::move(offsets)});
}

VBUCKET_COMPILED_INLINE void field_table::add_strings(std::string name,
                                                      std::span<const std::string> values) {
  auto [chars, offsets] = pack(values, name);
  add_strings(std::move(name), std::move(chars), std::move(offsets));
}

VBUCKET_COMPILED_INLINE void field_table::add_numbers(std::string name, field_dtype dtype,
                                                      std::vector<std::byte> values) {
  check_name(name);
  if (values.size() != rows_ * field_dtype_size(dtype))
    throw error("fields: column \"" + name + "\" has " +
                std::to_string(values.size() / field_dtype_size(dtype)) + " values for " +
                std::to_string(rows_) + " rows");
  numbers_.push_back({std::move(name), dtype, std::move(values)});
}

VBUCKET_COMPILED_INLINE void field_table::add_tensor_files(std::string name,
                                                           std::span<const std::string> paths) {
  auto [chars, offsets] = pack(paths, name);
  check_name(name);
  tensors_.push_back({std::move(name), std::move(chars), std::move(offsets)});
}

VBUCKET_COMPILED_INLINE std::optional<std::string> field_table::read_tensors(
    std::uint32_t sample, std::vector<field_tensor>& out) const {
  out.resize(tensors_.size());
  if (sample >= rows_) return "fields: sample " + std::to_string(sample) + " has no row";
  for (std::size_t c = 0; c < tensors_.size(); ++c)
    if (auto e = read_tensor_file(tensor_path(c, sample), tensors_[c].name, out[c])) return e;
  return std::nullopt;
}

VBUCKET_COMPILED_INLINE batch_fields field_table::gather(
    std::span<const std::uint32_t> samples, std::span<std::vector<field_tensor>> per_clip) const {
  batch_fields out;
  for (const auto& t : text_) {
    batch_fields::text_column col{t.name, {}, {0}};
    col.offsets.reserve(samples.size() + 1);
    for (const std::uint32_t s : samples) {
      col.chars.append(t.chars, t.offsets[s], t.offsets[s + 1] - t.offsets[s]);
      col.offsets.push_back(col.chars.size());
    }
    out.text.push_back(std::move(col));
  }
  for (const auto& n : numbers_) {
    const std::size_t es = field_dtype_size(n.dtype);
    batch_fields::number_column col{n.name, n.dtype, std::vector<std::byte>(samples.size() * es)};
    for (std::size_t i = 0; i < samples.size(); ++i)
      std::memcpy(col.data.data() + i * es, n.data.data() + samples[i] * es, es);
    out.numbers.push_back(std::move(col));
  }
  for (std::size_t c = 0; c < tensors_.size(); ++c) {
    batch_fields::tensor_column col{tensors_[c].name, {}};
    if (per_clip.size() == samples.size() && !samples.empty()) {
      const field_tensor& first = per_clip[0][c];
      col.stacked.dtype = first.dtype;
      col.stacked.shape.push_back(static_cast<std::int64_t>(samples.size()));
      col.stacked.shape.insert(col.stacked.shape.end(), first.shape.begin(), first.shape.end());
      col.stacked.data.reserve(first.data.size() * samples.size());
      for (std::size_t i = 0; i < samples.size(); ++i) {
        const field_tensor& t = per_clip[i][c];
        if (t.shape != first.shape || t.dtype != first.dtype)
          throw error("fields: tensor \"" + tensors_[c].name + "\": " + tensor_path(c, samples[i]) +
                      " has shape " + shape_text(t.shape) + " " + field_dtype_name(t.dtype) +
                      ", but " + tensor_path(c, samples[0]) + " in the same batch has " +
                      shape_text(first.shape) + " " + field_dtype_name(first.dtype) +
                      " (a batch stacks its tensors: one shape per bucket)");
        col.stacked.data.insert(col.stacked.data.end(), t.data.begin(), t.data.end());
      }
    }
    out.tensors.push_back(std::move(col));
  }
  return out;
}

VBUCKET_COMPILED_INLINE void field_table::check_name(const std::string& name) const {
  if (name.empty()) throw error("fields: a column needs a name");
  for (const auto& c : text_)
    if (c.name == name) throw error("fields: two columns named \"" + name + "\"");
  for (const auto& c : numbers_)
    if (c.name == name) throw error("fields: two columns named \"" + name + "\"");
  for (const auto& c : tensors_)
    if (c.name == name) throw error("fields: two columns named \"" + name + "\"");
}

VBUCKET_COMPILED_INLINE void field_table::check_rows(const std::string& name, std::size_t n) const {
  if (n != rows_)
    throw error("fields: column \"" + name + "\" has " + std::to_string(n) + " values for " +
                std::to_string(rows_) + " rows");
}

VBUCKET_COMPILED_INLINE std::pair<std::string, std::vector<std::uint64_t>> field_table::pack(
    std::span<const std::string> values, const std::string& name) const {
  check_rows(name, values.size());
  std::pair<std::string, std::vector<std::uint64_t>> p;
  p.second.reserve(values.size() + 1);
  p.second.push_back(0);
  for (const auto& v : values) {
    p.first += v;
    p.second.push_back(p.first.size());
  }
  return p;
}

#endif  // VBUCKET_HEADER_DEFINITIONS

}  // namespace vbucket
