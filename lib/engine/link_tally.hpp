#pragma once
// What crosses between the host and the offload device (docs/hybrid.md): bytes and copies each
// way, and how long each side of a hybrid FFN waited for the other.
#include <cstdint>

namespace pi {

struct link_tally {
    uint64_t to_device = 0, to_host = 0; // bytes copied
    uint64_t uploads = 0, downloads = 0; // copies; a download waits for the device
    double cpu_wait_seconds = 0.0;       // the CPU waiting for the device's hot neurons
    double device_wait_seconds = 0.0;    // the device idle while the CPU finished its cold ones

    void add(const link_tally& o) noexcept {
        to_device += o.to_device;
        to_host += o.to_host;
        uploads += o.uploads;
        downloads += o.downloads;
        cpu_wait_seconds += o.cpu_wait_seconds;
        device_wait_seconds += o.device_wait_seconds;
    }
    void count_upload(uint64_t bytes) noexcept {
        to_device += bytes;
        ++uploads;
    }
    void count_download(uint64_t bytes) noexcept {
        to_host += bytes;
        ++downloads;
    }
};

} // namespace pi
