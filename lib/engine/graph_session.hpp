#pragma once
// One batch's kernels on the offload device submitted as graphs (pib_backend.h version 6,
// docs/hybrid.md "Decode as graphs"): the session begins before the batch's first kernel and
// ends, submitting what is left, after its last; what it cost to submit is counted.
#include <cstdint>
#include <utility>

#include "backend/device.hpp"

namespace pi {

class graph_session {
  public:
    // dev null: no session (no device, or one without graph sessions).
    explicit graph_session(device* dev) : dev_(dev) {
        if (dev_ == nullptr) return;
        dev_->run("reading graph counters", &pib_vtable::graph_stats, &before_);
        dev_->run("beginning a graph session", &pib_vtable::graph_begin);
    }
    graph_session(const graph_session&) = delete;
    graph_session& operator=(const graph_session&) = delete;
    // On an error path the batch has failed already: the end's status adds nothing.
    ~graph_session() {
        if (dev_ != nullptr) static_cast<void>(dev_->vt().graph_end(dev_->ctx()));
    }

    // Submits what is left; the kernels the session ran and the submissions they took.
    std::pair<uint64_t, uint64_t> end() {
        device* dev = std::exchange(dev_, nullptr);
        if (dev == nullptr) return {0, 0};
        dev->run("ending a graph session", &pib_vtable::graph_end);
        pib_graph_stats after{};
        dev->run("reading graph counters", &pib_vtable::graph_stats, &after);
        return {after.kernels - before_.kernels, after.launches - before_.launches};
    }

  private:
    device* dev_;
    pib_graph_stats before_{};
};

} // namespace pi
