#include "openai_request.hpp"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <utility>

namespace pi_server {
namespace {

constexpr size_t max_stop_strings = 16;
constexpr int32_t max_top_logprobs = 20;

std::string library_error(const char* what) {
    const char* detail = pi_last_error();
    return std::string(what) + (detail && *detail ? std::string(": ") + detail : std::string());
}

request_error server_error(std::string message) {
    return request_error(500, "server_error", std::move(message));
}

// Null counts as absent: clients send "stop": null and the like for "not set".
const json* field(const json& body, const char* name) {
    const auto it = body.find(name);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

std::string format_number(double v) {
    std::string text = json(v).dump();
    if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0)
        text.resize(text.size() - 2);
    return text;
}

// A number in [lo, hi] ((lo, hi] when lo_open).
std::optional<float> number_field(const json& body, const char* name, double lo, double hi,
                                  bool lo_open = false) {
    const json* v = field(body, name);
    if (!v) return std::nullopt;
    const std::string range =
        std::string(lo_open ? "(" : "[") + format_number(lo) + ", " + format_number(hi) + "]";
    if (!v->is_number())
        throw bad_field(name, std::string("'") + name + "' must be a number in " + range);
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || (lo_open && x == lo) || x > hi)
        throw bad_field(name, std::string("'") + name + "' must be in " + range + " (got " +
                                  format_number(x) + ")");
    return static_cast<float>(x);
}

// A number >= lo (no upper bound).
std::optional<float> number_at_least(const json& body, const char* name, double lo) {
    const json* v = field(body, name);
    if (!v) return std::nullopt;
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < lo)
        throw bad_field(name,
                        std::string("'") + name + "' must be a number >= " + format_number(lo));
    return static_cast<float>(v->get<double>());
}

// An integer (1.0 counts) in [lo, hi].
bool is_integer(const json& v) {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    const double x = v.get<double>();
    return std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9.0e15;
}

int64_t integer_value(const json& v) {
    if (v.is_number_unsigned())
        return static_cast<int64_t>(
            std::min<uint64_t>(v.get<uint64_t>(), std::numeric_limits<int64_t>::max()));
    if (v.is_number_integer()) return v.get<int64_t>();
    return static_cast<int64_t>(v.get<double>());
}

std::optional<int32_t> integer_field(const json& body, const char* name, int64_t lo, int64_t hi,
                                     const char* meaning = nullptr) {
    const json* v = field(body, name);
    if (!v) return std::nullopt;
    const std::string what =
        meaning ? std::string(meaning)
                : "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    if (!is_integer(*v)) throw bad_field(name, std::string("'") + name + "' must be " + what);
    const int64_t x = integer_value(*v);
    if (x < lo || x > hi)
        throw bad_field(name, std::string("'") + name + "' must be " + what + " (got " +
                                  std::to_string(x) + ")");
    return static_cast<int32_t>(x);
}

std::optional<bool> bool_field(const json& body, const char* name) {
    const json* v = field(body, name);
    if (!v) return std::nullopt;
    if (!v->is_boolean())
        throw bad_field(name, std::string("'") + name + "' must be true or false");
    return v->get<bool>();
}

const json* string_field(const json& body, const char* name) {
    const json* v = field(body, name);
    if (v && !v->is_string()) throw bad_field(name, std::string("'") + name + "' must be a string");
    return v;
}

void parse_stop(const json& body, openai_request& r) {
    const json* v = field(body, "stop");
    if (!v) return;
    if (v->is_string()) {
        if (!v->get_ref<const std::string&>().empty()) r.stop.push_back(v->get<std::string>());
        return;
    }
    if (!v->is_array()) throw bad_field("stop", "'stop' must be a string or an array of strings");
    if (v->size() > max_stop_strings)
        throw bad_field("stop", "'stop' holds " + std::to_string(v->size()) + " strings; at most " +
                                    std::to_string(max_stop_strings));
    for (size_t i = 0; i < v->size(); ++i) {
        const json& s = (*v)[i];
        const std::string path = "stop[" + std::to_string(i) + "]";
        if (!s.is_string()) throw bad_field(path, "'" + path + "' must be a string");
        // An empty stop string would match everywhere; the library ignores it, and so do we.
        if (!s.get_ref<const std::string&>().empty()) r.stop.push_back(s.get<std::string>());
    }
}

void parse_logit_bias(const json& body, const pi_model* model, openai_request& r) {
    const json* v = field(body, "logit_bias");
    if (!v) return;
    if (!v->is_object())
        throw bad_field("logit_bias",
                        "'logit_bias' must be an object mapping token ids to numbers");
    const int32_t n_vocab = pi_n_vocab(model);
    for (const auto& [key, value] : v->items()) {
        const std::string path = "logit_bias." + key;
        char* end = nullptr;
        const long long id = key.empty() ? -1 : std::strtoll(key.c_str(), &end, 10);
        if (key.empty() || *end != '\0' || id < 0 || id >= n_vocab)
            throw bad_field(path, "'" + key + "' in 'logit_bias' is not a token id (0 .. " +
                                      std::to_string(n_vocab - 1) + ")");
        if (!value.is_number() || !std::isfinite(value.get<double>()) ||
            value.get<double>() < -100 || value.get<double>() > 100)
            throw bad_field(path, "'" + path + "' must be a number in [-100, 100]");
        r.logit_bias.push_back({static_cast<pi_token>(id), value.get<float>()});
    }
}

// llama.cpp's names of the stages of the chain; unknown names are skipped, as it does.
void parse_samplers(const json& body, openai_request& r) {
    const json* v = field(body, "samplers");
    if (!v || !v->is_array()) return;
    for (const json& s : *v)
        if (!s.is_string()) return;
    static const std::pair<const char*, pi_sampler_stage> names[] = {
        {"penalties", PI_SAMPLER_STAGE_PENALTIES},
        {"dry", PI_SAMPLER_STAGE_DRY},
        {"top_k", PI_SAMPLER_STAGE_TOP_K},
        {"typ_p", PI_SAMPLER_STAGE_TYPICAL},
        {"typical_p", PI_SAMPLER_STAGE_TYPICAL},
        {"top_p", PI_SAMPLER_STAGE_TOP_P},
        {"min_p", PI_SAMPLER_STAGE_MIN_P},
        {"xtc", PI_SAMPLER_STAGE_XTC},
        {"temperature", PI_SAMPLER_STAGE_TEMPERATURE}};
    for (const json& s : *v) {
        for (const auto& [name, stage] : names) {
            if (s.get_ref<const std::string&>() != name) continue;
            bool listed = false;
            for (const int32_t have : r.stages)
                listed = listed || have == stage;
            if (!listed) r.stages.push_back(stage);
        }
    }
}

void set_constraint(openai_request& r, std::string param, std::string grammar, std::string schema) {
    if (!r.constraint_param.empty())
        throw bad_field(param, "'" + param + "' cannot be combined with '" + r.constraint_param +
                                   "': give one grammar, JSON schema or response_format");
    r.constraint_param = std::move(param);
    r.grammar = std::move(grammar);
    r.json_schema = std::move(schema);
}

void parse_constraints(const json& body, openai_request& r) {
    if (const json* g = string_field(body, "grammar");
        g && !g->get_ref<const std::string&>().empty())
        set_constraint(r, "grammar", g->get<std::string>(), {});
    if (const json* s = field(body, "json_schema")) {
        if (!s->is_object() && !s->is_boolean())
            throw bad_field("json_schema", "'json_schema' must be a JSON schema (an object)");
        set_constraint(r, "json_schema", {}, s->dump());
    }
    const json* f = field(body, "response_format");
    if (!f) return;
    if (!f->is_object())
        throw bad_field("response_format", "'response_format' must be an object with a 'type'");
    const auto type = f->find("type");
    if (type == f->end() || !type->is_string())
        throw bad_field("response_format.type",
                        "'response_format.type' must be \"text\", \"json_object\" or "
                        "\"json_schema\"");
    const std::string& name = type->get_ref<const std::string&>();
    if (name == "text") return;
    if (name == "json_object") {
        // llama.cpp lets json_object carry a schema; without one, any JSON object.
        if (const json* schema = field(*f, "schema")) {
            if (!schema->is_object())
                throw bad_field("response_format.schema",
                                "'response_format.schema' must be a JSON schema (an object)");
            set_constraint(r, "response_format.schema", {}, schema->dump());
        } else {
            set_constraint(r, "response_format", {}, R"({"type":"object"})");
        }
        return;
    }
    if (name == "json_schema") {
        const json* spec = field(*f, "json_schema");
        if (!spec || !spec->is_object())
            throw bad_field("response_format.json_schema",
                            "'response_format.json_schema' must be an object with a 'schema'");
        const json* schema = field(*spec, "schema");
        if (!schema || !(schema->is_object() || schema->is_boolean()))
            throw bad_field("response_format.json_schema.schema",
                            "'response_format.json_schema.schema' must be a JSON schema (an "
                            "object)");
        set_constraint(r, "response_format.json_schema.schema", {}, schema->dump());
        return;
    }
    throw bad_field("response_format.type", "'response_format.type' must be \"text\", "
                                            "\"json_object\" or \"json_schema\" (got \"" +
                                                name + "\")");
}

void parse_sampling(const json& body, const pi_model* model, openai_request& r) {
    pi_sampler_params& s = r.sampling;
    if (auto v = number_field(body, "temperature", 0, 2)) s.temperature = *v;
    if (auto v = number_field(body, "top_p", 0, 1, true)) s.top_p = *v;
    if (auto v = integer_field(body, "top_k", std::numeric_limits<int32_t>::min(),
                               std::numeric_limits<int32_t>::max(), "an integer (<= 0: off)"))
        s.top_k = *v;
    if (auto v = number_field(body, "min_p", 0, 1)) s.min_p = *v;
    if (auto v = number_field(body, "typical_p", 0, 1, true)) s.typical_p = *v;
    if (auto v = number_field(body, "presence_penalty", -2, 2)) s.presence_penalty = *v;
    if (auto v = number_field(body, "frequency_penalty", -2, 2)) s.frequency_penalty = *v;
    if (auto v = number_field(body, "repeat_penalty", 0, std::numeric_limits<float>::max(), true))
        s.repeat_penalty = *v;
    if (auto v = integer_field(body, "repeat_last_n", -1, std::numeric_limits<int32_t>::max(),
                               "an integer >= -1 (-1: every token, 0: off)"))
        s.penalty_last_n = *v;
    if (auto v = integer_field(body, "mirostat", 0, 2, "0 (off), 1 or 2")) s.mirostat = *v;
    if (auto v = number_at_least(body, "mirostat_tau", 0)) s.mirostat_tau = *v;
    if (auto v = number_at_least(body, "mirostat_eta", 0)) s.mirostat_eta = *v;
    if (auto v = number_at_least(body, "dry_multiplier", 0)) s.dry_multiplier = *v;
    if (auto v = number_at_least(body, "dry_base", 1)) s.dry_base = *v;
    if (auto v = integer_field(body, "dry_allowed_length", 0, std::numeric_limits<int32_t>::max(),
                               "an integer >= 0"))
        s.dry_allowed_length = *v;
    if (auto v = integer_field(body, "dry_penalty_last_n", -1, std::numeric_limits<int32_t>::max(),
                               "an integer >= -1 (-1: every token, 0: off)"))
        s.dry_penalty_last_n = *v;
    if (const json* b = field(body, "dry_sequence_breakers")) {
        if (!b->is_array())
            throw bad_field("dry_sequence_breakers",
                            "'dry_sequence_breakers' must be an array of non-empty strings");
        for (size_t i = 0; i < b->size(); ++i) {
            const json& e = (*b)[i];
            const std::string path = "dry_sequence_breakers[" + std::to_string(i) + "]";
            if (!e.is_string() || e.get_ref<const std::string&>().empty())
                throw bad_field(path, "'" + path + "' must be a non-empty string");
            r.dry_sequence_breakers.push_back(e.get<std::string>());
        }
    }
    if (auto v = number_field(body, "xtc_probability", 0, 1)) s.xtc_probability = *v;
    if (auto v = number_field(body, "xtc_threshold", 0, 1)) s.xtc_threshold = *v;
    if (const json* v = field(body, "seed")) {
        if (!is_integer(*v)) throw bad_field("seed", "'seed' must be an integer (-1: random)");
        const int64_t seed = integer_value(*v);
        // Negative seeds mean "random", as in llama.cpp; larger ones keep their low 32 bits.
        s.seed = seed < 0 ? PI_SEED_RANDOM : static_cast<uint32_t>(seed & 0xFFFFFFFF);
    }
    parse_logit_bias(body, model, r);
    parse_samplers(body, r);
    parse_constraints(body, r);
}

void parse_common(const json& body, const request_context& context, openai_request& r) {
    string_field(body, "model");
    integer_field(body, "n", 1, 1, "1 (this server makes one choice per request)");
    if (auto v = bool_field(body, "stream")) r.stream = *v;
    if (const json* o = field(body, "stream_options")) {
        if (!o->is_object())
            throw bad_field("stream_options", "'stream_options' must be an object");
        if (const json* u = field(*o, "include_usage")) {
            if (!u->is_boolean())
                throw bad_field("stream_options.include_usage",
                                "'stream_options.include_usage' must be true or false");
            r.include_usage = u->get<bool>();
        }
    }
    r.max_tokens = context.default_max_tokens;
    for (const char* name : {"max_completion_tokens", "max_tokens", "n_predict"}) {
        if (auto v = integer_field(body, name, -1, std::numeric_limits<int32_t>::max(),
                                   "an integer >= 0 (or -1: until the context is full)")) {
            r.max_tokens = *v;
            break;
        }
    }
    parse_stop(body, r);
    if (auto v = bool_field(body, "ignore_eos")) r.ignore_eos = *v;
    bool_field(body, "cache_prompt"); // accepted: prefix reuse is always on
    parse_sampling(body, context.model, r);
}

std::string message_content(const json& message, const std::string& path) {
    const auto it = message.find("content");
    const std::string content_path = path + ".content";
    if (it == message.end() || it->is_null()) {
        // An assistant turn without text (OpenAI clients send content null with tool calls).
        const auto role = message.find("role");
        if (role != message.end() && *role == "assistant") return {};
        throw bad_field(content_path, "'" + content_path + "' is missing");
    }
    if (it->is_string()) return it->get<std::string>();
    if (!it->is_array())
        throw bad_field(content_path,
                        "'" + content_path + "' must be a string or an array of text parts");
    std::string text;
    for (size_t i = 0; i < it->size(); ++i) {
        const json& part = (*it)[i];
        const std::string part_path = content_path + "[" + std::to_string(i) + "]";
        if (!part.is_object())
            throw bad_field(part_path, "'" + part_path +
                                           "' must be an object {\"type\": \"text\", "
                                           "\"text\": ...}");
        const auto type = part.find("type");
        if (type == part.end() || *type != "text")
            throw bad_field(part_path + ".type", "'" + part_path +
                                                     ".type' must be \"text\": this model reads "
                                                     "text only");
        const auto part_text = part.find("text");
        if (part_text == part.end() || !part_text->is_string())
            throw bad_field(part_path + ".text", "'" + part_path + ".text' must be a string");
        text += part_text->get_ref<const std::string&>();
    }
    return text;
}

std::string render_chat(const json& body, const request_context& context) {
    const auto it = body.find("messages");
    if (it == body.end() || it->is_null()) throw bad_field("messages", "'messages' is required");
    if (!it->is_array() || it->empty())
        throw bad_field("messages", "'messages' must be a non-empty array of messages");
    std::vector<std::string> roles, contents;
    for (size_t i = 0; i < it->size(); ++i) {
        const json& m = (*it)[i];
        const std::string path = "messages[" + std::to_string(i) + "]";
        if (!m.is_object())
            throw bad_field(path, "'" + path + "' must be an object with 'role' and 'content'");
        const auto role = m.find("role");
        if (role == m.end() || !role->is_string())
            throw bad_field(path + ".role", "'" + path + ".role' must be a string");
        std::string name = role->get<std::string>();
        // OpenAI's newer name for the system turn.
        if (name == "developer") name = "system";
        if (name != "system" && name != "user" && name != "assistant")
            throw bad_field(path + ".role", "'" + path +
                                                ".role' must be \"system\", \"user\" or "
                                                "\"assistant\" (got \"" +
                                                role->get<std::string>() + "\")");
        contents.push_back(message_content(m, path));
        roles.push_back(std::move(name));
    }
    std::vector<pi_chat_message> messages(roles.size());
    for (size_t i = 0; i < roles.size(); ++i)
        messages[i] = {roles[i].c_str(), contents[i].c_str()};
    std::string text(4096, '\0');
    for (int attempt = 0; attempt < 2; ++attempt) {
        size_t len = 0;
        const pi_status st =
            pi_chat_apply_template(context.model, context.chat_template, messages.data(),
                                   messages.size(), 1, text.data(), text.size(), &len);
        if (st == PI_OK) {
            text.resize(len);
            return text;
        }
        if (st != PI_ERR_INVALID_ARGUMENT || len < text.size())
            throw server_error(library_error("the chat template cannot render the messages"));
        text.assign(len + 1, '\0');
    }
    throw server_error("the chat template's output kept growing");
}

std::vector<pi_token> completion_prompt(const json& body, const request_context& context,
                                        openai_request& r) {
    const auto it = body.find("prompt");
    if (it == body.end() || it->is_null()) throw bad_field("prompt", "'prompt' is required");
    const json* p = &*it;
    const char* shape = "'prompt' must be a string, an array of one string or an array of "
                        "token ids";
    if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array()))
        p = &(*p)[0]; // one prompt of a batch: n = 1 is all this server makes
    else if (p->is_array() && !p->empty() && (*p)[0].is_string())
        throw bad_field("prompt", "'prompt' holds several prompts; this server takes one");
    if (p->is_string()) {
        r.echo_text = p->get<std::string>();
        std::vector<pi_token> tokens =
            tokenize_text(context.model, r.echo_text, PI_TOKENIZE_ADD_BOS);
        if (tokens.empty()) throw bad_field("prompt", "'prompt' is empty");
        return tokens;
    }
    if (!p->is_array()) throw bad_field("prompt", shape);
    if (p->empty()) throw bad_field("prompt", "'prompt' is empty");
    const int32_t n_vocab = pi_n_vocab(context.model);
    std::vector<pi_token> tokens;
    tokens.reserve(p->size());
    for (size_t i = 0; i < p->size(); ++i) {
        const json& t = (*p)[i];
        const std::string path = "prompt[" + std::to_string(i) + "]";
        if (!is_integer(t) || integer_value(t) < 0 || integer_value(t) >= n_vocab)
            throw bad_field(path, "'" + path + "' must be a token id (0 .. " +
                                      std::to_string(n_vocab - 1) + ")");
        tokens.push_back(static_cast<pi_token>(integer_value(t)));
    }
    r.echo_text = detokenize_tokens(context.model, tokens);
    return tokens;
}

} // namespace

request_error::request_error(int status_, std::string type_, std::string message_,
                             std::string param_, std::string code_)
    : status(status_), type(std::move(type_)), message(std::move(message_)),
      param(std::move(param_)), code(std::move(code_)) {}

request_error bad_field(std::string param, std::string message) {
    return request_error(400, "invalid_request_error", std::move(message), std::move(param));
}

const char* error_type_for_status(int status) noexcept {
    switch (status) {
    case 401:
        return "authentication_error";
    case 403:
        return "permission_error";
    case 404:
        return "not_found_error";
    case 429:
        return "rate_limit_error";
    case 503:
        return "unavailable_error";
    default:
        return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

pi_sampler_params openai_request::sampler_params(std::vector<const char*>& breakers) const {
    pi_sampler_params p = sampling;
    p.logit_bias = logit_bias.empty() ? nullptr : logit_bias.data();
    p.n_logit_bias = logit_bias.size();
    p.stages = stages.empty() ? nullptr : stages.data();
    p.n_stages = stages.size();
    breakers.clear();
    for (const std::string& b : dry_sequence_breakers)
        breakers.push_back(b.c_str());
    p.dry_sequence_breakers = breakers.empty() ? nullptr : breakers.data();
    p.n_dry_sequence_breakers = breakers.size();
    p.grammar = grammar.empty() ? nullptr : grammar.c_str();
    p.json_schema = json_schema.empty() ? nullptr : json_schema.c_str();
    return p;
}

json parse_json_body(std::string_view body) {
    json value;
    try {
        value = json::parse(body.begin(), body.end());
    } catch (const json::exception& e) {
        // parse_error, or out_of_range for a number past a double ("1e309"). e.what() is
        // "[json.exception.parse_error.101] parse error at line 1, column 2: ...".
        std::string detail = e.what();
        if (const size_t close = detail.find("] "); close != std::string::npos)
            detail.erase(0, close + 2);
        throw request_error(400, "invalid_request_error",
                            "the request body is not valid JSON: " + detail);
    }
    if (!value.is_object())
        throw request_error(400, "invalid_request_error", "the request body must be a JSON object");
    return value;
}

openai_request parse_chat_request(const json& body, const request_context& context) {
    openai_request r;
    r.kind = request_kind::chat;
    parse_common(body, context, r);
    const std::string text = render_chat(body, context);
    r.prompt = tokenize_text(context.model, text, PI_TOKENIZE_PARSE_SPECIAL);
    // The template's text may start with the BOS text itself; the model gets one BOS either way.
    const pi_token bos = pi_token_bos(context.model);
    if (bos >= 0 && (r.prompt.empty() || r.prompt.front() != bos))
        r.prompt.insert(r.prompt.begin(), bos);
    if (r.prompt.empty()) throw bad_field("messages", "the messages render to an empty prompt");
    if (auto v = bool_field(body, "logprobs")) r.logprobs = *v;
    if (auto v = integer_field(body, "top_logprobs", 0, max_top_logprobs)) {
        if (!r.logprobs && *v > 0)
            throw bad_field("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r.top_logprobs = *v;
    }
    return r;
}

openai_request parse_completion_request(const json& body, const request_context& context) {
    openai_request r;
    r.kind = request_kind::completion;
    parse_common(body, context, r);
    r.prompt = completion_prompt(body, context, r);
    if (auto v = integer_field(body, "logprobs", 0, max_top_logprobs)) {
        r.logprobs = true;
        r.top_logprobs = *v;
    }
    if (auto v = bool_field(body, "echo")) r.echo = *v;
    if (!r.echo) r.echo_text.clear();
    return r;
}

sampler_ptr make_sampler(const pi_model* model, const openai_request& request) {
    std::vector<const char*> breakers;
    const pi_sampler_params params = request.sampler_params(breakers);
    pi_sampler* sampler = nullptr;
    if (pi_sampler_create_for_model(model, &params, &sampler) != PI_OK) {
        const std::string detail = pi_last_error();
        if (!request.constraint_param.empty())
            throw bad_field(request.constraint_param,
                            "'" + request.constraint_param + "' cannot be used: " + detail);
        throw request_error(400, "invalid_request_error",
                            "the sampling fields are refused: " + detail);
    }
    return sampler_ptr(sampler);
}

tokenize_request parse_tokenize_request(const json& body) {
    tokenize_request r;
    const json* content = string_field(body, "content");
    if (!content) throw bad_field("content", "'content' is required (a string)");
    r.content = content->get<std::string>();
    if (auto v = bool_field(body, "add_special")) r.add_special = *v;
    if (auto v = bool_field(body, "parse_special")) r.parse_special = *v;
    if (auto v = bool_field(body, "with_pieces")) r.with_pieces = *v;
    return r;
}

std::vector<pi_token> parse_detokenize_request(const json& body, const pi_model* model) {
    const json* tokens = field(body, "tokens");
    if (!tokens) throw bad_field("tokens", "'tokens' is required (an array of token ids)");
    if (!tokens->is_array()) throw bad_field("tokens", "'tokens' must be an array of token ids");
    const int32_t n_vocab = pi_n_vocab(model);
    std::vector<pi_token> out;
    out.reserve(tokens->size());
    for (size_t i = 0; i < tokens->size(); ++i) {
        const json& t = (*tokens)[i];
        const std::string path = "tokens[" + std::to_string(i) + "]";
        if (!is_integer(t) || integer_value(t) < 0 || integer_value(t) >= n_vocab)
            throw bad_field(path, "'" + path + "' must be a token id (0 .. " +
                                      std::to_string(n_vocab - 1) + ")");
        out.push_back(static_cast<pi_token>(integer_value(t)));
    }
    return out;
}

std::vector<pi_token> tokenize_text(const pi_model* model, std::string_view text, uint32_t flags) {
    // A token is at least one byte, plus BOS.
    std::vector<pi_token> tokens(text.size() + 2);
    size_t n = 0;
    pi_status st = pi_tokenize_with_flags(model, text.data(), text.size(), flags, tokens.data(),
                                          tokens.size(), &n);
    if (st == PI_ERR_INVALID_ARGUMENT && n > tokens.size()) {
        tokens.resize(n);
        st = pi_tokenize_with_flags(model, text.data(), text.size(), flags, tokens.data(),
                                    tokens.size(), &n);
    }
    if (st != PI_OK) throw server_error(library_error("the text cannot be tokenized"));
    tokens.resize(n);
    return tokens;
}

std::string token_piece(const pi_model* model, pi_token token) {
    std::string piece(32, '\0');
    size_t len = 0;
    pi_status st = pi_token_to_piece(model, token, piece.data(), piece.size(), &len);
    if (st == PI_ERR_INVALID_ARGUMENT && len > piece.size()) {
        piece.resize(len);
        st = pi_token_to_piece(model, token, piece.data(), piece.size(), &len);
    }
    if (st != PI_OK) throw server_error(library_error("a token has no text"));
    piece.resize(len);
    return piece;
}

std::string detokenize_tokens(const pi_model* model, const std::vector<pi_token>& tokens) {
    std::string text(tokens.size() * 8 + 16, '\0');
    for (int attempt = 0; attempt < 2; ++attempt) {
        size_t len = 0;
        const pi_status st =
            pi_detokenize(model, tokens.data(), tokens.size(), text.data(), text.size(), &len);
        if (st == PI_OK) {
            text.resize(len);
            return text;
        }
        if (st != PI_ERR_INVALID_ARGUMENT || len < text.size())
            throw server_error(library_error("the tokens cannot be detokenized"));
        text.assign(len + 1, '\0');
    }
    throw server_error("the detokenized text kept growing");
}

} // namespace pi_server
