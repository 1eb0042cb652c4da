// pi-server's request parsing, response shapes and Prometheus text, on the really-trained
// fixture model (its tokenizer and chat template) without a scheduler or a socket.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "metrics.hpp"
#include "openai_request.hpp"
#include "openai_response.hpp"
#include "powerinfer.h"

extern "C" const char tool_name[] = "test_server_core";

using namespace pi_server;

namespace {

const pi_model* fixture_model() {
    static pi_model* model = [] {
        pi_model* m = nullptr;
        pi_model_params params = pi_model_default_params();
        params.offload_device = "none";
        REQUIRE(pi_model_load(PI_TEST_MODEL, &params, &m) == PI_OK);
        return m;
    }();
    return model;
}

request_context fixture_context() {
    request_context c;
    c.model = fixture_model();
    c.chat_template = "chatml";
    c.default_max_tokens = 64;
    return c;
}

json chat_body(json extra = json::object()) {
    json body = {{"messages", {{{"role", "user"}, {"content", "In the beginning"}}}}};
    for (const auto& [key, value] : extra.items())
        body[key] = value;
    return body;
}

json completion_body(json extra = json::object()) {
    json body = {{"prompt", "In the beginning"}};
    for (const auto& [key, value] : extra.items())
        body[key] = value;
    return body;
}

// The error a parse throws (status 0 when it throws none).
template <class Parse> request_error error_of(Parse parse) {
    try {
        parse();
    } catch (const request_error& e) {
        return e;
    }
    return request_error(0, "", "no error");
}

request_error chat_error(json extra) {
    return error_of([&] { parse_chat_request(chat_body(std::move(extra)), fixture_context()); });
}

} // namespace

TEST_CASE("a body that is not JSON is a 400 naming where it breaks") {
    const request_error e = error_of([] { parse_json_body("{\"messages\": [}"); });
    CHECK(e.status == 400);
    CHECK(e.type == "invalid_request_error");
    CHECK(e.message.find("line 1, column 15") != std::string::npos);
    CHECK(e.message.find("[json.exception") == std::string::npos);
    CHECK(error_of([] { parse_json_body("[1, 2]"); }).message.find("JSON object") !=
          std::string::npos);
    CHECK(error_of([] { parse_json_body(""); }).status == 400);
    CHECK(parse_json_body("{\"a\": 1}")["a"] == 1);
    // A number past a double is nlohmann-json's out_of_range, not a parse_error
    // (server_request_fuzz).
    const request_error overflow = error_of([] { parse_json_body("{\"top_p\": 1e309}"); });
    CHECK(overflow.status == 400);
    CHECK(overflow.message.find("number overflow parsing '1e309'") != std::string::npos);
    CHECK(overflow.message.find("[json.exception") == std::string::npos);
}

TEST_CASE("a chat request without sampling fields takes the library's defaults") {
    const openai_request r = parse_chat_request(chat_body(), fixture_context());
    const pi_sampler_params d = pi_sampler_default_params();
    CHECK(r.kind == request_kind::chat);
    CHECK(r.sampling.temperature == doctest::Approx(d.temperature));
    CHECK(r.sampling.top_k == d.top_k);
    CHECK(r.sampling.top_p == doctest::Approx(d.top_p));
    CHECK(r.sampling.min_p == doctest::Approx(d.min_p));
    CHECK(r.sampling.seed == PI_SEED_RANDOM);
    CHECK(r.max_tokens == 64); // the server's -n
    CHECK_FALSE(r.stream);
    CHECK_FALSE(r.include_usage);
    CHECK_FALSE(r.logprobs);
    CHECK(r.stop.empty());
    CHECK(r.grammar.empty());
    CHECK(r.json_schema.empty());
    CHECK(r.logit_bias.empty());
}

TEST_CASE("chat messages are rendered with the template and start with exactly one BOS") {
    const pi_model* model = fixture_model();
    const openai_request r = parse_chat_request(
        chat_body({{"messages",
                    {{{"role", "system"}, {"content", "Be brief."}},
                     {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hello"}}}}}}}}),
        fixture_context());
    const pi_token bos = pi_token_bos(model);
    REQUIRE(r.prompt.size() > 2);
    CHECK(r.prompt[0] == bos);
    CHECK(r.prompt[1] != bos);
    const std::string text = detokenize_tokens(model, r.prompt);
    CHECK(text.find("Be brief.") != std::string::npos);
    CHECK(text.find("Hello") != std::string::npos);
    CHECK(text.find("assistant") != std::string::npos); // the opening of the reply's turn

    // A template whose text starts with the BOS text itself (llama2's "<s>") gets no second BOS.
    request_context llama2 = fixture_context();
    llama2.chat_template = "llama2";
    const openai_request l = parse_chat_request(chat_body(), llama2);
    REQUIRE(l.prompt.size() > 2);
    CHECK(l.prompt[0] == bos);
    CHECK(l.prompt[1] != bos);
}

TEST_CASE("every bad chat field is a 400 naming its JSON path") {
    struct bad_case {
        json fields;
        const char* param;
    };
    const std::vector<bad_case> cases = {
        {{{"messages", nullptr}}, "messages"},
        {{{"messages", json::array()}}, "messages"},
        {{{"messages", "hello"}}, "messages"},
        {{{"messages", {"hello"}}}, "messages[0]"},
        {{{"messages", {{{"content", "hi"}}}}}, "messages[0].role"},
        {{{"messages", {{{"role", "tool"}, {"content", "hi"}}}}}, "messages[0].role"},
        {{{"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "user"}}}}},
         "messages[1].content"},
        {{{"messages", {{{"role", "user"}, {"content", 5}}}}}, "messages[0].content"},
        {{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}},
         "messages[0].content[0].type"},
        {{{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}}}}}}}},
         "messages[0].content[0].text"},
        {{{"model", 3}}, "model"},
        {{{"temperature", 2.5}}, "temperature"},
        {{{"temperature", -0.1}}, "temperature"},
        {{{"temperature", "hot"}}, "temperature"},
        {{{"top_p", 0}}, "top_p"},
        {{{"top_p", 1.5}}, "top_p"},
        {{{"top_k", 1.5}}, "top_k"},
        {{{"min_p", 2}}, "min_p"},
        {{{"typical_p", 0}}, "typical_p"},
        {{{"presence_penalty", -3}}, "presence_penalty"},
        {{{"frequency_penalty", 2.5}}, "frequency_penalty"},
        {{{"repeat_penalty", 0}}, "repeat_penalty"},
        {{{"repeat_last_n", -2}}, "repeat_last_n"},
        {{{"mirostat", 3}}, "mirostat"},
        {{{"mirostat_tau", -1}}, "mirostat_tau"},
        {{{"mirostat_eta", "x"}}, "mirostat_eta"},
        {{{"dry_multiplier", -1}}, "dry_multiplier"},
        {{{"dry_base", 0.5}}, "dry_base"},
        {{{"dry_allowed_length", -1}}, "dry_allowed_length"},
        {{{"dry_penalty_last_n", -2}}, "dry_penalty_last_n"},
        {{{"dry_sequence_breakers", {"\n", ""}}}, "dry_sequence_breakers[1]"},
        {{{"xtc_probability", 1.5}}, "xtc_probability"},
        {{{"xtc_threshold", -0.5}}, "xtc_threshold"},
        {{{"seed", "forty-two"}}, "seed"},
        {{{"seed", 1.5}}, "seed"},
        {{{"n", 2}}, "n"},
        {{{"stream", "yes"}}, "stream"},
        {{{"stream_options", true}}, "stream_options"},
        {{{"stream_options", {{"include_usage", 1}}}}, "stream_options.include_usage"},
        {{{"max_tokens", -2}}, "max_tokens"},
        {{{"max_tokens", "many"}}, "max_tokens"},
        {{{"max_completion_tokens", 1.5}}, "max_completion_tokens"},
        {{{"n_predict", -5}}, "n_predict"},
        {{{"stop", 5}}, "stop"},
        {{{"stop", {"a", 7}}}, "stop[1]"},
        {{{"stop", std::vector<std::string>(17, "x")}}, "stop"},
        {{{"ignore_eos", "no"}}, "ignore_eos"},
        {{{"cache_prompt", 1}}, "cache_prompt"},
        {{{"logit_bias", {1, 2}}}, "logit_bias"},
        {{{"logit_bias", {{"abc", 1}}}}, "logit_bias.abc"},
        {{{"logit_bias", {{"-1", 1}}}}, "logit_bias.-1"},
        {{{"logit_bias", {{"99999999", 1}}}}, "logit_bias.99999999"},
        {{{"logit_bias", {{"5", 101}}}}, "logit_bias.5"},
        {{{"logit_bias", {{"5", "up"}}}}, "logit_bias.5"},
        {{{"logprobs", 1}}, "logprobs"},
        {{{"logprobs", true}, {"top_logprobs", 21}}, "top_logprobs"},
        {{{"top_logprobs", 3}}, "top_logprobs"},
        {{{"response_format", "json"}}, "response_format"},
        {{{"response_format", json::object()}}, "response_format.type"},
        {{{"response_format", {{"type", "xml"}}}}, "response_format.type"},
        {{{"response_format", {{"type", "json_schema"}}}}, "response_format.json_schema"},
        {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}}},
         "response_format.json_schema.schema"},
        {{{"response_format", {{"type", "json_object"}, {"schema", 5}}}}, "response_format.schema"},
        {{{"grammar", 5}}, "grammar"},
        {{{"json_schema", "{}"}}, "json_schema"},
        {{{"grammar", "root ::= \"a\""}, {"json_schema", {{"type", "string"}}}}, "json_schema"},
        {{{"grammar", "root ::= \"a\""}, {"response_format", {{"type", "json_object"}}}},
         "response_format"},
    };
    for (const bad_case& c : cases) {
        CAPTURE(c.fields.dump());
        const request_error e = chat_error(c.fields);
        CHECK(e.status == 400);
        CHECK(e.type == "invalid_request_error");
        CHECK(e.param == c.param);
        CHECK_FALSE(e.message.empty());
    }
}

TEST_CASE("every bad completion field is a 400 naming its JSON path") {
    struct bad_case {
        json body;
        const char* param;
    };
    const std::vector<bad_case> cases = {
        {json::object(), "prompt"},
        {{{"prompt", 5}}, "prompt"},
        {{{"prompt", json::array()}}, "prompt"},
        {{{"prompt", {"one", "two"}}}, "prompt"},
        {{{"prompt", {1, -1}}}, "prompt[1]"},
        {{{"prompt", {1, 99999999}}}, "prompt[1]"},
        {{{"prompt", {1, "x"}}}, "prompt[1]"},
        {{{"prompt", "x"}, {"logprobs", 21}}, "logprobs"},
        {{{"prompt", "x"}, {"logprobs", true}}, "logprobs"},
        {{{"prompt", "x"}, {"echo", "yes"}}, "echo"},
        {{{"prompt", "x"}, {"temperature", 9}}, "temperature"},
    };
    for (const bad_case& c : cases) {
        CAPTURE(c.body.dump());
        const request_error e =
            error_of([&] { parse_completion_request(c.body, fixture_context()); });
        CHECK(e.status == 400);
        CHECK(e.param == c.param);
    }
}

TEST_CASE("sampling fields land in the sampler's parameters") {
    const openai_request r = parse_chat_request(chat_body({{"temperature", 0},
                                                           {"top_p", 0.5},
                                                           {"top_k", 5},
                                                           {"min_p", 0.1},
                                                           {"typical_p", 0.9},
                                                           {"presence_penalty", 0.5},
                                                           {"frequency_penalty", -0.5},
                                                           {"repeat_penalty", 1.1},
                                                           {"repeat_last_n", 32},
                                                           {"mirostat", 2},
                                                           {"mirostat_tau", 4},
                                                           {"mirostat_eta", 0.2},
                                                           {"dry_multiplier", 0.8},
                                                           {"dry_base", 2},
                                                           {"dry_allowed_length", 3},
                                                           {"dry_penalty_last_n", 128},
                                                           {"xtc_probability", 0.5},
                                                           {"xtc_threshold", 0.2},
                                                           {"seed", 42},
                                                           {"ignore_eos", true},
                                                           {"user", "someone"},
                                                           {"an_unknown_field", {1, 2, 3}}}),
                                                fixture_context());
    const pi_sampler_params& s = r.sampling;
    CHECK(s.temperature == 0.0f);
    CHECK(s.top_p == doctest::Approx(0.5));
    CHECK(s.top_k == 5);
    CHECK(s.min_p == doctest::Approx(0.1));
    CHECK(s.typical_p == doctest::Approx(0.9));
    CHECK(s.presence_penalty == doctest::Approx(0.5));
    CHECK(s.frequency_penalty == doctest::Approx(-0.5));
    CHECK(s.repeat_penalty == doctest::Approx(1.1));
    CHECK(s.penalty_last_n == 32);
    CHECK(s.mirostat == 2);
    CHECK(s.mirostat_tau == doctest::Approx(4));
    CHECK(s.mirostat_eta == doctest::Approx(0.2));
    CHECK(s.dry_multiplier == doctest::Approx(0.8));
    CHECK(s.dry_base == doctest::Approx(2));
    CHECK(s.dry_allowed_length == 3);
    CHECK(s.dry_penalty_last_n == 128);
    CHECK(s.xtc_probability == doctest::Approx(0.5));
    CHECK(s.xtc_threshold == doctest::Approx(0.2));
    CHECK(s.seed == 42u);
    CHECK(r.ignore_eos);
    CHECK(make_sampler(fixture_model(), r) != nullptr);

    CHECK(parse_chat_request(chat_body({{"seed", -1}}), fixture_context()).sampling.seed ==
          PI_SEED_RANDOM);
    // Fields sent as null count as absent.
    CHECK(parse_chat_request(chat_body({{"temperature", nullptr}, {"stop", nullptr}}),
                             fixture_context())
              .sampling.temperature == doctest::Approx(pi_sampler_default_params().temperature));
}

TEST_CASE("max_tokens, max_completion_tokens and n_predict are one field") {
    const request_context c = fixture_context();
    CHECK(parse_chat_request(chat_body({{"max_tokens", 7}}), c).max_tokens == 7);
    CHECK(parse_chat_request(chat_body({{"max_completion_tokens", 8}}), c).max_tokens == 8);
    CHECK(parse_chat_request(chat_body({{"n_predict", 9}}), c).max_tokens == 9);
    CHECK(parse_chat_request(chat_body({{"max_tokens", -1}}), c).max_tokens == -1);
    CHECK(parse_chat_request(chat_body({{"max_tokens", 0}}), c).max_tokens == 0);
    CHECK(parse_chat_request(chat_body({{"max_tokens", 3.0}}), c).max_tokens == 3);
    CHECK(parse_chat_request(chat_body({{"max_completion_tokens", 5}, {"max_tokens", 6}}), c)
              .max_tokens == 5);
}

TEST_CASE("stop is a string or an array of strings, empty ones dropped") {
    const request_context c = fixture_context();
    CHECK(parse_chat_request(chat_body({{"stop", "\n"}}), c).stop ==
          std::vector<std::string>{"\n"});
    CHECK(parse_chat_request(chat_body({{"stop", {"a", "", "bc"}}}), c).stop ==
          std::vector<std::string>{"a", "bc"});
    CHECK(parse_chat_request(chat_body({{"stop", ""}}), c).stop.empty());
    CHECK(parse_chat_request(chat_body({{"stop", std::vector<std::string>(16, "x")}}), c)
              .stop.size() == 16);
}

TEST_CASE("logit_bias maps token ids to biases") {
    const openai_request r = parse_chat_request(
        chat_body({{"logit_bias", {{"5", -100}, {"17", 2.5}}}}), fixture_context());
    REQUIRE(r.logit_bias.size() == 2);
    CHECK(r.logit_bias[0].token == 5);
    CHECK(r.logit_bias[0].bias == -100.0f);
    CHECK(r.logit_bias[1].token == 17);
    CHECK(r.logit_bias[1].bias == 2.5f);
    std::vector<const char*> breakers;
    const pi_sampler_params p = r.sampler_params(breakers);
    CHECK(p.n_logit_bias == 2);
    CHECK(p.logit_bias == r.logit_bias.data());
    CHECK(make_sampler(fixture_model(), r) != nullptr);
}

TEST_CASE("samplers names the stage order when it is an array of strings") {
    const request_context c = fixture_context();
    const openai_request r = parse_chat_request(
        chat_body({{"samplers", {"top_k", "temperature", "no_such_stage", "top_k"}}}), c);
    CHECK(r.stages == std::vector<int32_t>{PI_SAMPLER_STAGE_TOP_K, PI_SAMPLER_STAGE_TEMPERATURE});
    CHECK(make_sampler(fixture_model(), r) != nullptr);
    CHECK(parse_chat_request(chat_body({{"samplers", "top_k;temperature"}}), c).stages.empty());
    CHECK(parse_chat_request(chat_body({{"samplers", {"top_k", 3}}}), c).stages.empty());
}

TEST_CASE("response_format becomes the grammar or JSON schema of the sampler") {
    const request_context c = fixture_context();
    SUBCASE("text constrains nothing") {
        const openai_request r =
            parse_chat_request(chat_body({{"response_format", {{"type", "text"}}}}), c);
        CHECK(r.grammar.empty());
        CHECK(r.json_schema.empty());
    }
    SUBCASE("json_object is any JSON object") {
        const openai_request r =
            parse_chat_request(chat_body({{"response_format", {{"type", "json_object"}}}}), c);
        CHECK(json::parse(r.json_schema) == json{{"type", "object"}});
        CHECK(r.grammar.empty());
        CHECK(r.constraint_param == "response_format");
        CHECK(make_sampler(fixture_model(), r) != nullptr);
    }
    SUBCASE("json_object with llama.cpp's schema") {
        const openai_request r = parse_chat_request(
            chat_body({{"response_format",
                        {{"type", "json_object"}, {"schema", {{"type", "integer"}}}}}}),
            c);
        CHECK(json::parse(r.json_schema) == json{{"type", "integer"}});
        CHECK(r.constraint_param == "response_format.schema");
    }
    SUBCASE("json_schema is its schema") {
        const json schema = {{"type", "object"},
                             {"properties", {{"name", {{"type", "string"}}}}},
                             {"required", {"name"}}};
        const openai_request r = parse_chat_request(
            chat_body({{"response_format",
                        {{"type", "json_schema"},
                         {"json_schema", {{"name", "person"}, {"schema", schema}}}}}}),
            c);
        CHECK(json::parse(r.json_schema) == schema);
        CHECK(r.grammar.empty());
        CHECK(r.constraint_param == "response_format.json_schema.schema");
        std::vector<const char*> breakers;
        CHECK(std::string(r.sampler_params(breakers).json_schema) == r.json_schema);
        CHECK(make_sampler(fixture_model(), r) != nullptr);
    }
    SUBCASE("llama.cpp's grammar and json_schema fields") {
        const openai_request g =
            parse_chat_request(chat_body({{"grammar", "root ::= \"yes\" | \"no\""}}), c);
        CHECK(g.grammar == "root ::= \"yes\" | \"no\"");
        CHECK(g.constraint_param == "grammar");
        CHECK(make_sampler(fixture_model(), g) != nullptr);
        const openai_request s =
            parse_chat_request(chat_body({{"json_schema", {{"type", "boolean"}}}}), c);
        CHECK(s.constraint_param == "json_schema");
        CHECK(make_sampler(fixture_model(), s) != nullptr);
    }
}

TEST_CASE("a grammar or schema that does not compile is a 400 naming its field") {
    const request_context c = fixture_context();
    const auto sampler_error = [&](json fields) {
        const openai_request r = parse_chat_request(chat_body(std::move(fields)), c);
        return error_of([&] { make_sampler(fixture_model(), r); });
    };
    const request_error g = sampler_error({{"grammar", "root ::= \"unterminated"}});
    CHECK(g.status == 400);
    CHECK(g.param == "grammar");
    CHECK(g.message.find("line 1") != std::string::npos);
    const request_error s =
        sampler_error({{"response_format",
                        {{"type", "json_schema"},
                         {"json_schema",
                          {{"name", "x"}, {"schema", {{"type", "string"}, {"pattern", "a+"}}}}}}}});
    CHECK(s.status == 400);
    CHECK(s.param == "response_format.json_schema.schema");
    CHECK(s.message.find("pattern") != std::string::npos);
}

TEST_CASE("chat logprobs: a bool and 0..20 alternatives") {
    const request_context c = fixture_context();
    const openai_request r =
        parse_chat_request(chat_body({{"logprobs", true}, {"top_logprobs", 20}}), c);
    CHECK(r.logprobs);
    CHECK(r.top_logprobs == 20);
    CHECK_FALSE(parse_chat_request(chat_body({{"logprobs", false}}), c).logprobs);
}

TEST_CASE("completion prompts: text with BOS, token ids as given, echo") {
    const pi_model* model = fixture_model();
    const request_context c = fixture_context();
    const openai_request text = parse_completion_request(completion_body(), c);
    CHECK(text.kind == request_kind::completion);
    REQUIRE(text.prompt.size() > 1);
    CHECK(text.prompt[0] == pi_token_bos(model));
    CHECK(text.echo_text.empty()); // echo is off
    CHECK(parse_completion_request(completion_body({{"prompt", {"In the beginning"}}}), c).prompt ==
          text.prompt);

    const openai_request echoed = parse_completion_request(completion_body({{"echo", true}}), c);
    CHECK(echoed.echo);
    CHECK(echoed.echo_text == "In the beginning");

    const std::vector<pi_token> ids(text.prompt.begin() + 1, text.prompt.end());
    const openai_request tokens = parse_completion_request({{"prompt", ids}, {"echo", true}}, c);
    CHECK(tokens.prompt == ids);
    CHECK(tokens.echo_text == detokenize_tokens(model, ids));
    CHECK(parse_completion_request({{"prompt", {ids}}}, c).prompt == ids);

    const openai_request empty = parse_completion_request({{"prompt", ""}}, c);
    CHECK(empty.prompt == std::vector<pi_token>{pi_token_bos(model)});

    const openai_request lp = parse_completion_request(completion_body({{"logprobs", 0}}), c);
    CHECK(lp.logprobs);
    CHECK(lp.top_logprobs == 0);
    CHECK(parse_completion_request(completion_body({{"logprobs", 5}}), c).top_logprobs == 5);
}

TEST_CASE("streaming options") {
    const request_context c = fixture_context();
    const openai_request r = parse_chat_request(
        chat_body({{"stream", true}, {"stream_options", {{"include_usage", true}}}}), c);
    CHECK(r.stream);
    CHECK(r.include_usage);
}

TEST_CASE("tokenize and detokenize requests") {
    const tokenize_request t = parse_tokenize_request(
        {{"content", "hello"}, {"add_special", true}, {"with_pieces", true}});
    CHECK(t.content == "hello");
    CHECK(t.add_special);
    CHECK_FALSE(t.parse_special);
    CHECK(t.with_pieces);
    CHECK(error_of([] { parse_tokenize_request(json::object()); }).param == "content");
    CHECK(error_of([] { parse_tokenize_request({{"content", 5}}); }).param == "content");
    CHECK(error_of([] {
              parse_tokenize_request({{"content", "x"}, {"parse_special", 1}});
          }).param == "parse_special");

    const pi_model* model = fixture_model();
    CHECK(parse_detokenize_request({{"tokens", {1, 2, 3}}}, model) ==
          std::vector<pi_token>{1, 2, 3});
    CHECK(error_of([&] { parse_detokenize_request(json::object(), model); }).param == "tokens");
    CHECK(error_of([&] {
              parse_detokenize_request({{"tokens", "1 2"}}, model);
          }).param == "tokens");
    CHECK(error_of([&] {
              parse_detokenize_request({{"tokens", {1, -4}}}, model);
          }).param == "tokens[1]");

    const std::vector<pi_token> ids = tokenize_text(model, "In the beginning", 0);
    CHECK(detokenize_tokens(model, ids) == "In the beginning");
    CHECK(tokenize_text(model, "In the beginning", PI_TOKENIZE_ADD_BOS).size() == ids.size() + 1);
}

TEST_CASE("the error object has OpenAI's four fields, null when unset") {
    const json e = error_json(bad_field("messages[1].content", "'messages[1].content' is missing"));
    CHECK(e["error"]["message"] == "'messages[1].content' is missing");
    CHECK(e["error"]["type"] == "invalid_request_error");
    CHECK(e["error"]["param"] == "messages[1].content");
    CHECK(e["error"]["code"].is_null());
    const json q = error_json(request_error(429, "rate_limit_error", "full", {}, "queue_full"));
    CHECK(q["error"]["param"].is_null());
    CHECK(q["error"]["code"] == "queue_full");
    CHECK(std::string(error_type_for_status(401)) == "authentication_error");
    CHECK(std::string(error_type_for_status(404)) == "not_found_error");
    CHECK(std::string(error_type_for_status(405)) == "invalid_request_error");
    CHECK(std::string(error_type_for_status(413)) == "invalid_request_error");
    CHECK(std::string(error_type_for_status(429)) == "rate_limit_error");
    CHECK(std::string(error_type_for_status(500)) == "server_error");
    CHECK(std::string(error_type_for_status(503)) == "unavailable_error");
}

TEST_CASE("chat and completion responses have OpenAI's shape with usage and timings") {
    const reply_meta meta{"chatcmpl-7", "kjv", 1700000000};
    generation_usage usage;
    usage.prompt_tokens = 12;
    usage.cached_tokens = 4;
    usage.completion_tokens = 10;
    usage.prompt_seconds = 0.5;
    usage.decode_seconds = 2.0;

    const json chat =
        chat_response(meta, "Let there be light", nullptr, finish_reason::stop, usage, 0.25);
    CHECK(chat["id"] == "chatcmpl-7");
    CHECK(chat["object"] == "chat.completion");
    CHECK(chat["created"] == 1700000000);
    CHECK(chat["model"] == "kjv");
    REQUIRE(chat["choices"].size() == 1);
    const json& choice = chat["choices"][0];
    CHECK(choice["index"] == 0);
    CHECK(choice["message"] == json{{"role", "assistant"}, {"content", "Let there be light"}});
    CHECK(choice["logprobs"].is_null());
    CHECK(choice["finish_reason"] == "stop");
    CHECK(chat["usage"] == json{{"prompt_tokens", 12},
                                {"completion_tokens", 10},
                                {"total_tokens", 22},
                                {"prompt_tokens_details", {{"cached_tokens", 4}}}});
    const json& t = chat["timings"];
    CHECK(t["prompt_n"] == 8);
    CHECK(t["prompt_ms"] == doctest::Approx(500));
    CHECK(t["predicted_n"] == 10);
    CHECK(t["predicted_ms"] == doctest::Approx(2000));
    CHECK(t["predicted_per_second"] == doctest::Approx(5));
    CHECK(t["cached_n"] == 4);
    CHECK(t["ffn_active_fraction"] == doctest::Approx(0.25));

    const json text = completion_response({"cmpl-3", "kjv", 5}, "and the earth", nullptr,
                                          finish_reason::length, usage, 0.25);
    CHECK(text["object"] == "text_completion");
    CHECK(text["choices"][0]["text"] == "and the earth");
    CHECK(text["choices"][0]["finish_reason"] == "length");
    CHECK(text["usage"]["total_tokens"] == 22);
    CHECK(text["timings"].contains("ffn_active_fraction"));

    CHECK(timings_json(generation_usage{}, 0.0)["predicted_per_second"] == 0.0);
}

TEST_CASE("stream chunks: deltas, the finish, the usage chunk and the SSE framing") {
    const reply_meta meta{"chatcmpl-1", "kjv", 9};
    const json first =
        chat_chunk(meta, {{"role", "assistant"}, {"content", ""}}, nullptr, finish_reason::none);
    CHECK(first["object"] == "chat.completion.chunk");
    CHECK(first["choices"][0]["delta"] == json{{"role", "assistant"}, {"content", ""}});
    CHECK(first["choices"][0]["finish_reason"].is_null());
    const json last = chat_chunk(meta, json::object(), nullptr, finish_reason::length);
    CHECK(last["choices"][0]["delta"] == json::object());
    CHECK(last["choices"][0]["finish_reason"] == "length");

    generation_usage usage;
    usage.prompt_tokens = 3;
    usage.completion_tokens = 2;
    const json u = usage_chunk(meta, request_kind::chat, usage);
    CHECK(u["choices"] == json::array());
    CHECK(u["usage"]["total_tokens"] == 5);
    CHECK(usage_chunk(meta, request_kind::completion, usage)["object"] == "text_completion");

    const json c = completion_chunk({"cmpl-2", "kjv", 9}, " light", nullptr, finish_reason::none);
    CHECK(c["object"] == "text_completion");
    CHECK(c["choices"][0]["text"] == " light");

    CHECK(sse_event(json{{"a", 1}}) == "data: {\"a\":1}\n\n");
    CHECK(std::string(sse_done) == "data: [DONE]\n\n");
    // Half a character (a byte-fallback token) cannot break the JSON text.
    CHECK(json_text(json{{"t", std::string("a\xE2\x80")}}) == "{\"t\":\"a\xEF\xBF\xBD\"}");
}

TEST_CASE("logprobs shapes carry the token text, its bytes and the alternatives") {
    const pi_model* model = fixture_model();
    const std::vector<pi_token> ids = tokenize_text(model, "In the beginning", 0);
    REQUIRE(ids.size() >= 2);
    std::vector<token_output> outputs(2);
    outputs[0].token = ids[0];
    outputs[0].logprob = -0.5f;
    outputs[0].top = {{ids[0], -0.5f}, {ids[1], -1.5f}};
    outputs[1].token = ids[1];
    outputs[1].logprob = -2.0f;
    outputs[1].top = {{ids[1], -2.0f}};
    token_output held_back; // the text released at the end: no token, no logprob
    held_back.token = -1;
    held_back.text = "x";
    outputs.push_back(held_back);
    const std::string piece0 = token_piece(model, ids[0]);
    const std::string piece1 = token_piece(model, ids[1]);

    const json chat = chat_logprobs(model, outputs);
    REQUIRE(chat["content"].size() == 2);
    const json& first = chat["content"][0];
    CHECK(first["token"] == piece0);
    CHECK(first["logprob"] == doctest::Approx(-0.5));
    REQUIRE(first["bytes"].size() == piece0.size());
    CHECK(first["bytes"][0] == static_cast<unsigned char>(piece0[0]));
    REQUIRE(first["top_logprobs"].size() == 2);
    CHECK(first["top_logprobs"][1]["token"] == piece1);
    CHECK(first["top_logprobs"][1]["logprob"] == doctest::Approx(-1.5));
    CHECK(first["top_logprobs"][1]["bytes"].size() == piece1.size());

    const json text = completion_logprobs(model, outputs, 10);
    CHECK(text["tokens"] == json{piece0, piece1});
    REQUIRE(text["token_logprobs"].size() == 2);
    CHECK(text["token_logprobs"][1] == doctest::Approx(-2.0));
    REQUIRE(text["top_logprobs"].size() == 2);
    CHECK(text["top_logprobs"][0][piece1] == doctest::Approx(-1.5));
    CHECK(text["text_offset"] == json{10, 10 + piece0.size()});
}

TEST_CASE("the Prometheus text has every metric with HELP and TYPE") {
    metrics m;
    m.count_request("/v1/chat/completions", 200);
    m.count_request("/v1/chat/completions", 200);
    m.count_request("/v1/chat/completions", 429);
    m.count_request("weird\"route\\", 404);
    m.generation_started();
    m.generation_started();
    m.generation_ended();
    m.count_cancelled();
    CHECK(m.requests("/v1/chat/completions", 200) == 2);
    CHECK(m.requests("/v1/chat/completions", 500) == 0);
    CHECK(m.in_flight() == 1);
    CHECK(m.cancelled() == 1);

    scheduler_stats s;
    s.n_slots = 4;
    s.slots_busy = 3;
    s.queue_length = 2;
    s.prompt_tokens = 100;
    s.generated_tokens = 50;
    s.prompt_seconds = 1.5;
    s.decode_seconds = 10;
    s.ffn_active_fraction = 0.125;
    const std::string text = m.prometheus_text(s);
    const auto has = [&](const std::string& line) {
        return text.find(line + "\n") != std::string::npos;
    };
    const std::pair<const char*, const char*> all[] = {
        {"powerinfer_requests_total", "counter"},
        {"powerinfer_prompt_tokens_total", "counter"},
        {"powerinfer_generated_tokens_total", "counter"},
        {"powerinfer_prompt_seconds_total", "counter"},
        {"powerinfer_decode_seconds_total", "counter"},
        {"powerinfer_decode_tokens_per_second", "gauge"},
        {"powerinfer_queue_length", "gauge"},
        {"powerinfer_slots_busy", "gauge"},
        {"powerinfer_slots_total", "gauge"},
        {"powerinfer_requests_in_flight", "gauge"},
        {"powerinfer_ffn_active_fraction", "gauge"},
        {"powerinfer_requests_cancelled_total", "counter"},
    };
    for (const auto& [name, type] : all) {
        CAPTURE(name);
        CHECK(text.find(std::string("# HELP ") + name + " ") != std::string::npos);
        CHECK(has(std::string("# TYPE ") + name + " " + type));
    }
    CHECK(has("powerinfer_requests_total{route=\"/v1/chat/completions\",code=\"200\"} 2"));
    CHECK(has("powerinfer_requests_total{route=\"/v1/chat/completions\",code=\"429\"} 1"));
    CHECK(has("powerinfer_requests_total{route=\"weird\\\"route\\\\\",code=\"404\"} 1"));
    CHECK(has("powerinfer_prompt_tokens_total 100"));
    CHECK(has("powerinfer_generated_tokens_total 50"));
    CHECK(has("powerinfer_prompt_seconds_total 1.5"));
    CHECK(has("powerinfer_decode_seconds_total 10"));
    CHECK(has("powerinfer_decode_tokens_per_second 5"));
    CHECK(has("powerinfer_queue_length 2"));
    CHECK(has("powerinfer_slots_busy 3"));
    CHECK(has("powerinfer_slots_total 4"));
    CHECK(has("powerinfer_requests_in_flight 1"));
    CHECK(has("powerinfer_ffn_active_fraction 0.125"));
    CHECK(has("powerinfer_requests_cancelled_total 1"));
    CHECK(text.back() == '\n');
}
