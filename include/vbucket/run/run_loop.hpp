#pragma once
/// One rank's trainer loop over a `run_plan`, as a stateful loader hands out batches (DESIGN,
/// round 4), and the ledger of what it handed out.
///
///  - `next()` hands out this rank's batch of the current step. The run moves on when the
///    trainer asks for the next batch or saves: the batch handed out counts as trained then.
///  - `state()` taken after batch k was handed out names the position after it: a run loaded
///    from it hands out batch k + 1 next (never k again).
///  - `out_of_memory(...)` after batch k was handed out says step k failed: the next batch
///    handed out is step k planned again with the smaller batch sizes; its samples are never
///    lost. (After `state()` step k counts as trained, so the call is refused.)
///  - `load(state)` restores the world the state was saved under, unless a world is given.
///  - `next()` returns nullopt once at the end of each epoch (a `for` loop over one epoch);
///    the call after that hands out the next epoch's first batch.
///
/// With a ledger directory, the loop writes this rank's file (`ledger_file_name(rank)`) itself:
/// the epoch's header lines and one `B` record per batch, written before the batch is handed
/// out (and the epoch's undelivered samples, rank 0, with its last step). An out-of-memory call
/// removes the failed step's record (its samples are delivered by the step planned again), and
/// `load` cuts the file back to the records of the steps before the state's (a kill -9 between
/// a record and the save of the state leaves records the resumed run hands out again), so the
/// ledger holds exactly the batches of the saved state, under any world (rank 0's load also
/// cuts the files of ranks the world no longer has), and `vbucket audit` proves what the
/// trainer was handed.
///
///     vbucket::run_loop loop(run, rank, "ledger");
///     if (saved) loop.load(*saved);
///     while (auto b = loop.next()) {
///       if (!train(*b)) { loop.out_of_memory(); continue; }  // every rank, same step
///       save(loop.state());
///     }

#include <algorithm>     // std::min
#include <charconv>      // std::from_chars
#include <cstdint>       // std::uint32_t, std::uint64_t
#include <filesystem>    // std::filesystem::file_size, resize_file, create_directories
#include <memory>        // std::unique_ptr
#include <optional>      // std::optional
#include <span>          // std::span
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::error_code
#include <utility>       // std::move, std::pair
#include <vector>        // std::vector

#include "ledger.hpp"      // ledger_writer, ledger_file_name
#include "run_ledger.hpp"  // run_ledger
#include "run_plan.hpp"
#include "vbucket/base/error.hpp"

namespace vbucket {

/// One rank's loop over a run (see the header comment). The run must outlive it; every rank
/// has its own run and loop and makes the same calls at the same steps.
class run_loop {
 public:
  /// Throws `vbucket::error` when `rank` is not below the run's world, or the ledger
  /// directory cannot be made. `format`: the ledger's (default: binary, or the format of the
  /// ledger a file already holds; `ledger_writer`).
  explicit run_loop(run_plan& run, std::uint32_t rank = 0, std::string ledger_dir = {},
                    std::optional<ledger_format> format = std::nullopt)
      : run_(run), rank_(rank), dir_(std::move(ledger_dir)), format_(format) {
    check_rank();
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(dir_, ec);
      if (ec) throw error("ledger " + dir_ + ": " + ec.message());
      path_ = dir_ + "/" + ledger_file_name(rank_);
    }
  }

  [[nodiscard]] std::uint32_t rank() const noexcept { return rank_; }
  [[nodiscard]] const run_plan& run() const noexcept { return run_; }
  /// Whether a batch was handed out and not yet counted as trained.
  [[nodiscard]] bool handed_out() const noexcept { return pending_; }
  /// The ledger file this loop writes (empty: none).
  [[nodiscard]] const std::string& ledger_path() const noexcept { return path_; }

  /// The batch handed out before (if any) was trained: the run moves past it. Then this rank's
  /// batch of the current step, written to the ledger before it is returned; nullopt (once)
  /// when the epoch of the batch handed out before has ended.
  std::optional<run_batch> next() {
    std::optional<run_batch> b = take();
    if (b) record(*b);
    return b;
  }

  /// `next()` in two parts, for a loader that decodes the batch before it is handed out
  /// (`run_loader`): `take()` moves past the batch handed out before and returns this rank's
  /// batch of the current step, now in hand, with no record; `record` writes its record (with
  /// the substitutions made in it, global ids) before the batch is handed out.
  std::optional<run_batch> take() {
    settle();
    if (ended_) {
      ended_ = false;
      return std::nullopt;
    }
    run_batch b = run_.batch(rank_);
    before_ = file_bytes(path_);
    pending_ = true;
    return b;
  }
  /// The batch taken was not handed out after all (its decoding failed): it is not in hand.
  void untake() noexcept { pending_ = false; }
  /// Records go through the one writer of run records (`run_ledger`): rank 0 declares the
  /// epoch and closes it; a new writer (after a cut, a load or a new rank) declares the epoch
  /// again, as a resumed run does.
  void record(const run_batch& b, std::span<const ledger_substitution> substitutions = {}) {
    if (path_.empty()) return;
    if (!out_) out_ = std::make_unique<run_ledger>(ledger_writer(path_, format_), rank_);
    before_ = file_bytes(path_);
    out_->record(run_, b, substitutions);
  }

  /// The run's state line after the batches handed out (the one handed out last counts as
  /// trained).
  [[nodiscard]] std::string state() {
    settle();
    return run_.state();
  }

  /// The batch handed out last failed (out of memory on `ranks`, empty: all): the next batch
  /// handed out is its step planned again (`run_plan::out_of_memory`). Throws `vbucket::error`
  /// when no batch is in hand (none handed out, or `state()` counted it as trained) and as
  /// `run_plan::out_of_memory`.
  void out_of_memory(std::span<const std::uint32_t> ranks = {}, double factor = 0.5) {
    if (!pending_)
      throw error(
          "run: out_of_memory: no batch is in hand (none was handed out since the loop began or "
          "since state(), which counted the last one as trained)");
    run_.out_of_memory(ranks, factor);  // throws before anything changes when it cannot
    if (!path_.empty()) {
      cut(path_, before_);  // the failed step's records go (an epoch declared with them too)
      out_.reset();         // so the next writer declares the epoch again
    }
    pending_ = false;
  }

  /// From the step after the batch handed out (which counts as trained), `world` ranks; this
  /// loop's rank becomes `rank` (default: unchanged). Every rank calls it at the same step.
  void set_world(std::uint32_t world, std::optional<std::uint32_t> rank = std::nullopt) {
    if (rank && *rank >= world)
      throw error("run: rank " + std::to_string(*rank) + " is not below world " +
                  std::to_string(world));
    if (!rank && rank_ >= world)
      throw error("run: rank " + std::to_string(rank_) + " is not below world " +
                  std::to_string(world) + " (give this loop's new rank)");
    settle();
    run_.set_world(world);
    if (rank && *rank != rank_) {
      rank_ = *rank;
      if (!dir_.empty()) {
        path_ = dir_ + "/" + ledger_file_name(rank_);
        out_.reset();  // the new file gets the epoch's declaration
      }
    }
  }

  /// Resumes from the state line `state` under the world it was saved under, or `world` when
  /// given. With a ledger, the file loses its records of the state's step and later ones
  /// (handed out after the state was taken: they are handed out again). Throws `vbucket::error`
  /// as `run_plan::load`, or when a ledger file cannot be read; then the loop and the ledger
  /// are as they were.
  void load(std::string_view state, std::optional<std::uint32_t> world = std::nullopt) {
    const std::uint64_t w = world ? *world : state_field(state, " world=");
    if (w != 0 && rank_ >= w)
      throw error("run: rank " + std::to_string(rank_) + " is not below world " +
                  std::to_string(w) +
                  (world ? "" : " (the state's; give the world to load it under)"));
    // Where each file is cut, found before anything changes (a ledger that cannot be read
    // refuses the load). Rank 0 also cuts the files of ranks the world no longer has.
    std::vector<std::pair<std::string, std::uint64_t>> cuts;
    if (!path_.empty()) {
      const std::uint64_t step = state_field(state, " step=");
      cuts.emplace_back(path_, records_before(path_, step));
      if (rank_ == 0)
        for (std::string& other : files_of_ranks_from(w))
          cuts.emplace_back(other, records_before(other, step));
    }
    run_.load(state);
    if (world && *world != run_.world()) run_.set_world(*world);
    pending_ = false;
    ended_ = false;
    out_.reset();  // the epoch's declaration again, after the cut
    for (const auto& [path, bytes] : cuts) cut(path, bytes);
  }

 private:
  /// A number field of a state line, `key` = " name=" (0 when it has none or it is not a
  /// number: `run_plan::load` names that).
  [[nodiscard]] static std::uint64_t state_field(std::string_view state, std::string_view key) {
    const std::size_t at = state.find(key);
    std::uint64_t v = 0;
    if (at != std::string_view::npos) {
      const std::string_view text = state.substr(at + key.size());
      (void)std::from_chars(text.data(), text.data() + text.size(), v);
    }
    return v;
  }
  void check_rank() const {
    if (rank_ >= run_.world())
      throw error("run: rank " + std::to_string(rank_) + " is not below world " +
                  std::to_string(run_.world()));
  }
  /// The batch in hand was trained: the run moves past it.
  void settle() {
    if (!pending_) return;
    const std::uint64_t e = run_.epoch();
    pending_ = false;
    run_.advance();
    if (run_.epoch() != e) ended_ = true;
  }
  [[nodiscard]] static std::uint64_t file_bytes(const std::string& path) {
    if (path.empty()) return 0;
    std::error_code ec;
    const std::uintmax_t n = std::filesystem::file_size(path, ec);
    return ec ? 0 : static_cast<std::uint64_t>(n);
  }
  /// The length of a ledger file's lines before its first record of step `step` or later (or
  /// a line cut short by a kill).
  [[nodiscard]] static std::uint64_t records_before(const std::string& path, std::uint64_t step) {
    if (file_bytes(path) == 0) return 0;
    ledger_reader in(path);
    ledger_line line;
    ledger_batch b;
    for (std::uint64_t at = in.tell(); in.next(line); at = in.tell()) {
      if (line.truncated) return at;
      if (line.tag != 'B') continue;
      parse_ledger_record(line, {path, line.number}, b);
      if (b.step >= step) return at;
    }
    return file_bytes(path);
  }
  static void cut(const std::string& path, std::uint64_t bytes) {
    std::error_code ec;
    if (file_bytes(path) > bytes) std::filesystem::resize_file(path, bytes, ec);
    if (ec) throw error("ledger " + path + ": cannot cut it back: " + ec.message());
  }
  /// The ledger files in the directory of ranks `world` and above (no loop of a run of
  /// `world` ranks writes them).
  [[nodiscard]] std::vector<std::string> files_of_ranks_from(std::uint64_t world) const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
      const std::string name = e.path().filename().string();
      std::uint32_t r = 0;
      const auto [ptr, why] = std::from_chars(name.data() + std::min<std::size_t>(5, name.size()),
                                              name.data() + name.size(), r);
      if (name.rfind("rank-", 0) == 0 && why == std::errc{} && r >= world &&
          name == ledger_file_name(r))
        out.push_back(e.path().string());
    }
    return out;
  }
  run_plan& run_;
  std::uint32_t rank_ = 0;
  std::string dir_, path_;
  std::optional<ledger_format> format_;
  std::unique_ptr<run_ledger> out_;
  std::uint64_t before_ = 0;  // the ledger's length before the record of the batch in hand
  bool pending_ = false;      // a batch was handed out and not yet counted as trained
  bool ended_ = false;        // the run moved into the next epoch; `next()` says so once
};

}  // namespace vbucket
