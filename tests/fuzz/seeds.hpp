#pragma once
// The seed writers of pi-make-fuzz-seeds, one per group of targets; each writes the inputs of one
// target into its folder, in that target's input layout (the mode byte and fields its file's
// header describes).
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace pi::fuzz {

void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes);
// The target's mode byte, then the text.
void write_text(const std::filesystem::path& path, uint8_t mode, std::string_view text);

// state_seeds.cpp: states the library saved from `model` (state_fuzz).
void write_state_seeds(const std::filesystem::path& dir, const std::string& model);

// text_seeds.cpp
void write_grammar_seeds(const std::filesystem::path& dir);
void write_json_schema_seeds(const std::filesystem::path& dir);
void write_chat_seeds(const std::filesystem::path& dir);
void write_server_request_seeds(const std::filesystem::path& dir);

} // namespace pi::fuzz
