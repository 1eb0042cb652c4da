// The module loader: where it looks, what it loads, and the reason it gives for every module it
// cannot use. The fake modules (fake_module.c) and libpowerinfer-gpusim.so are found through
// POWERINFER_BACKEND_PATH, set by CTest.
#include "backend/device.hpp"
#include "backend/module_loader.hpp"
#include "support/error.hpp"

#include <doctest/doctest.h>

#include "../test_env.hpp"
#include <cstdlib>
#include <optional>
#include <string>

using namespace pi;

namespace {

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

// Sets an environment variable for one scope and restores it afterwards.
class scoped_env {
  public:
    scoped_env(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        pi::test::set_env(name, value);
    }
    ~scoped_env() {
        if (old_)
            pi::test::set_env(name_, old_->c_str());
        else
            pi::test::unset_env(name_);
    }
    scoped_env(const scoped_env&) = delete;
    scoped_env& operator=(const scoped_env&) = delete;

  private:
    const char* name_;
    std::optional<std::string> old_;
};

} // namespace

TEST_CASE("POWERINFER_BACKEND_PATH folders come first, then the core's own folder") {
    const scoped_env env("POWERINFER_BACKEND_PATH", "/first::/second:");
    const std::vector<std::string> dirs = backend_module_dirs();
    REQUIRE(dirs.size() == 3);
    CHECK(dirs[0] == "/first");
    CHECK(dirs[1] == "/second");
    CHECK_FALSE(dirs[2].empty());
}

TEST_CASE("the core knows the CUDA and HIP modules and probes both") {
    CHECK(backend_module_names() == std::vector<std::string>{"cuda", "hip"});
    const std::vector<module_status> all = probe_backend_modules();
    REQUIRE(all.size() == 2);
    for (const module_status& s : all) {
        CHECK((s.loaded || !s.reason.empty()));
        CHECK(contains(describe(s), s.name == "cuda" ? "CUDA backend: " : "HIP backend: "));
    }
}

TEST_CASE("a module that is not there is reported with the folders searched") {
    const module_status s = probe_backend_module("nosuch");
    CHECK_FALSE(s.loaded);
    CHECK(s.path.empty());
    CHECK(contains(s.reason, "libpowerinfer-nosuch.so not found (searched: "));
    CHECK(contains(describe(s), "unavailable: libpowerinfer-nosuch.so not found"));
    CHECK_THROWS_WITH_AS(device::from_module("nosuch", 0),
                         doctest::Contains("nosuch backend unavailable"), pi::error);
}

TEST_CASE("a file that is not a shared object is refused with dlopen's reason") {
    const module_status s = probe_backend_module("broken");
    CHECK_FALSE(s.loaded);
    CHECK(contains(s.reason, "cannot load "));
    CHECK(contains(s.reason, "libpowerinfer-broken.so: "));
}

TEST_CASE("a shared object without the module door is refused") {
    const module_status s = probe_backend_module("notamodule");
    CHECK_FALSE(s.loaded);
    CHECK(contains(s.reason, "is not a libpowerinfer backend module"));
}

TEST_CASE("a module built for another backend API version is refused before any other call") {
    const module_status s = probe_backend_module("future");
    CHECK_FALSE(s.loaded);
    CHECK(contains(s.reason, "was built for backend API version " +
                                 std::to_string(PIB_API_VERSION + 1) +
                                 ", this libpowerinfer uses " + std::to_string(PIB_API_VERSION)));
    try {
        device::from_module("future", 0);
        FAIL("a module of another API version was accepted");
    } catch (const pi::error& e) {
        CHECK(e.code() == status::unsupported);
    }
}

TEST_CASE("a module without a device reports the module's own reason") {
    const module_status s = probe_backend_module("nodevice");
    CHECK_FALSE(s.loaded);
    CHECK_FALSE(s.path.empty());
    CHECK(s.reason == "fake: no device here");
    CHECK_THROWS_WITH_AS(device::from_module("nodevice", 0),
                         doctest::Contains("fake: no device here"), pi::error);
}

TEST_CASE("a usable module is loaded with its devices, and creates backends of the core's API") {
    const module_status s = probe_backend_module("gpusim");
    REQUIRE(s.loaded);
    CHECK(s.reason.empty());
    REQUIRE(s.devices.size() == 1);
    // The simulation has no cuBLAS: prompts take the module's own kernels, and it says why
    // (conformance_module_loader_blas_off runs this with the switch off).
    const char* blas = std::getenv("POWERINFER_GPU_BLAS");
    const std::string gemm = blas != nullptr && std::string(blas) == "0"
                                 ? "own tiled kernels: POWERINFER_GPU_BLAS=0"
                                 : "own tiled kernels: the GPU simulation has no BLAS library";
    const std::string name = "GPU kernels simulated on the CPU, prompts: " + gemm;
    CHECK(s.devices[0].name == name);
    CHECK(s.devices[0].memory_total > 0);
    CHECK(contains(describe(s), "libpowerinfer-gpusim.so ("));
    CHECK(contains(describe(s), ": 1 device: " + name + " (1.0 GiB)"));

    device d = device::from_module("gpusim", 0);
    CHECK(d.vt().api_version == PIB_API_VERSION);
    buffer b = d.alloc(64);
    const float in[4] = {1, 2, 3, 4};
    float out[4] = {};
    d.upload(b, 16, in, sizeof in);
    d.download(b, 16, out, sizeof out);
    CHECK(out[3] == 4.0f);
    CHECK_THROWS_WITH_AS(device::from_module("gpusim", 1),
                         doctest::Contains("device 1 does not exist"), pi::error);
}
