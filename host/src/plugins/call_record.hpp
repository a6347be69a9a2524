// Which plugin call a training process is in, kept where its supervisor can
// read it after the process died (run/supervise.hpp): memory both share
// (MAP_SHARED), written before and after every plugin call with plain atomic
// stores, so nothing has to run in a signal handler when a plugin crashes.
// A process that has no record (tests, the other commands) notes nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>

namespace altgrad::host {

struct call_record {
    std::atomic<int32_t> calls_running{0};  // plugin calls in progress (threads quantize at once)
    std::atomic<int64_t> steps_done{-1};    // -1: not in the training loop yet
    std::atomic<char> plugin[64]{};         // the plugin of the last call begun
    std::atomic<char> call[32]{};           // and the call: "quantize", "create", ...
    std::atomic<char> run_dir[4096]{};      // the run directory, once it exists
};

// A zeroed record in memory a fork()ed child shares with its parent; nullptr
// when it cannot be mapped.
call_record* make_shared_call_record();

// From now on this process notes its plugin calls, steps and run directory in
// `record` (nullptr: stop noting).
void note_calls_in(call_record* record);

void note_steps_done(int64_t steps);
void note_run_dir(const std::filesystem::path& dir);

// Notes "plugin `plugin` is in `call`" for its lifetime. Text longer than the
// record's fields is cut short.
class noted_call {
public:
    noted_call(const std::string& plugin, const char* call);
    ~noted_call();
    noted_call(const noted_call&) = delete;
    noted_call& operator=(const noted_call&) = delete;

private:
    call_record* record_;
};

// What a record says, read by the supervisor once its child has died.
struct call_snapshot {
    bool in_call = false;  // a plugin call was running when the process died
    std::string plugin, call;
    int64_t steps_done = -1;
    std::filesystem::path run_dir;
};
call_snapshot read_call_record(const call_record& record);

}  // namespace altgrad::host
