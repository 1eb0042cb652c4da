#pragma once
// powerinfer._powerinfer._Model: a loaded pi_model. The handle is shared with the contexts made
// from it, so close() frees the weights once the last of those contexts is closed too.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "state.hpp"

namespace pi::python {

struct load_args {
    bool use_mmap = true;
    bool dense = false;
    int32_t ffn_activation = PI_FFN_ACTIVATION_AUTO;
    std::optional<float> sparse_threshold;
    std::optional<double> vram_budget;
    std::optional<std::string> offload_device;
    int32_t kv_n_ctx = 0;
    bool reset_gpu_index = false;
    bool disable_gpu_index = false;
    // File-system bytes (os.fsencode).
    std::optional<std::string> activation_stats;
};

class model {
  public:
    // path: file-system bytes (os.fsencode); progress: callable(float) or None.
    model(const std::string& path, const load_args& args, pybind11::object progress);

    // The live handle; ValueError once closed.
    model_ptr handle() const;
    void close() noexcept { handle_.reset(); }
    bool closed() const noexcept { return !handle_; }

    pybind11::dict info() const;
    // special: the text of control tokens ("<s>", "<|im_start|>") is that token.
    std::vector<int32_t> tokenize(const std::string& text, bool add_bos, bool special) const;
    pybind11::str detokenize(const std::vector<int32_t>& ids) const;
    pybind11::bytes token_to_piece(int32_t id) const;
    bool token_is_eog(int32_t id) const;

    // Chat templates (model_chat.cpp). messages: (role, content) pairs; tmpl: a template name or
    // text, or none for the model's own.
    pybind11::str
    apply_chat_template(const std::vector<std::pair<std::string, std::string>>& messages,
                        const std::optional<std::string>& tmpl, bool add_assistant) const;
    std::string chat_template_name(const std::optional<std::string>& tmpl) const;

  private:
    model_ptr handle_;
};

void bind_model(pybind11::module_& m);
void bind_model_chat(pybind11::class_<model>& c);

} // namespace pi::python
