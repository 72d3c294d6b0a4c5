// flaxpp/transforms/recording_agreement.hpp — how the processes of a job agree on each call of
// a jitted step recorded as a CUDA graph whose graph holds collectives: NCCL needs a collective
// captured on every rank or on none, so every process must record, replay or run eagerly
// alike. transforms asks; the dist layer, which transforms cannot call, answers through the
// agreement it installs for a job of several processes (src/transforms/step_recording.hpp's
// agree_on_call says how the votes go).
#pragma once

#include <cstdint>
#include <functional>

namespace flaxpp::transforms {

// One process's vote on a call of a recorded step; the least vote of the job's processes wins.
enum class RecordingVote : std::uint8_t {
  never,    // no recording of the step from now on: eagerly, without voting again
  not_now,  // eagerly this call (an argument moved); a later call may record again
  ready,    // a recording can be made, or launched
};

// The least of every process's vote (one host collective, so every process calls it as often
// as the others); the identity in a job of one.
using RecordingAgreement = std::function<RecordingVote(RecordingVote)>;
// Installed by the dist layer for a job of several processes; empty: each decides alone.
void set_recording_agreement(RecordingAgreement agree);

}  // namespace flaxpp::transforms
