#include "synthetic/family.hpp"

#include "synthetic/options.hpp"

namespace pi::synth {
namespace {

constexpr family_traits families[] = {
    {family::llama, "llama", "llama", true, false},
    {family::prosparse, "prosparse", "llama", true, false},
    {family::bamboo, "bamboo", "bamboo", true, false},
    {family::falcon, "falcon", "falcon", false, true},
    {family::falcon_40b, "falcon-40b", "falcon", false, true},
    {family::opt, "opt", "opt", false, true},
};

} // namespace

const family_traits& family_named(const std::string& name) {
    const std::string& key = name == "llama-relu" ? std::string("llama") : name;
    for (const family_traits& f : families)
        if (key == f.name) return f;
    bad_option("arch '", name,
               "' is not one of llama (llama-relu), prosparse, bamboo, falcon, falcon-40b, opt");
}

} // namespace pi::synth
