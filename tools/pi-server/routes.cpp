#include "routes.hpp"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "chat_page.hpp"
#include "metrics.hpp"
#include "openai_request.hpp"
#include "openai_response.hpp"

namespace pi_server {
namespace {

using httplib::Request;
using httplib::Response;
using Server = httplib::Server;

// How long a content provider waits for tokens before it looks at its client again, and how
// often a non-streaming reply writes a space while it waits, so that a client that went away
// makes a write fail and its generation is cancelled.
constexpr std::chrono::milliseconds take_timeout{100};
constexpr std::chrono::seconds keep_alive_interval{1};

const char* const get_routes[] = {"/", "/health", "/v1/models", "/metrics"};
const char* const post_routes[] = {"/v1/chat/completions", "/v1/completions", "/v1/embeddings",
                                   "/tokenize", "/detokenize"};

// The metrics label of a path: the route, or "other" for every unknown path (a label per
// unknown path would let clients grow the metrics without bound).
std::string route_label(const std::string& path) {
    for (const char* route : get_routes)
        if (path == route) return path;
    for (const char* route : post_routes)
        if (path == route) return path;
    return "other";
}

void send_json(Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(json_text(body), "application/json");
}

void send_error(Response& res, const request_error& error) {
    send_json(res, error.status, error_json(error));
}

request_error internal_error(const char* what) {
    return request_error(500, "server_error", std::string("internal error: ") + what);
}

// Runs a handler so that no exception leaves it: request_errors become their answer, anything
// else a 500.
template <class Handler> Server::Handler guarded(Handler handler) {
    return [handler = std::move(handler)](const Request& req, Response& res) {
        try {
            handler(req, res);
        } catch (const request_error& e) {
            send_error(res, e);
        } catch (const std::exception& e) {
            send_error(res, internal_error(e.what()));
        } catch (...) {
            send_error(res, internal_error("unknown exception"));
        }
    };
}

// Compares without stopping at the first difference, so the time of a rejection does not tell
// how much of a guessed key was right.
bool same_key(const std::string& given, const std::string& key) {
    unsigned char diff = given.size() == key.size() ? 0 : 1;
    for (size_t i = 0; i < given.size(); ++i)
        diff |= static_cast<unsigned char>(given[i] ^ key[i % key.size()]);
    return diff == 0;
}

bool authorized(const Request& req, const std::string& key) {
    const std::string bearer = "Bearer ";
    const std::string authorization = req.get_header_value("Authorization");
    if (authorization.compare(0, bearer.size(), bearer) == 0 &&
        same_key(authorization.substr(bearer.size()), key))
        return true;
    return req.has_header("X-Api-Key") && same_key(req.get_header_value("X-Api-Key"), key);
}

bool has_body(const Request& req) {
    return req.has_header("Transfer-Encoding") ||
           (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
}

bool valid_utf8(const std::string& text) {
    size_t i = 0;
    while (i < text.size()) {
        const auto c = static_cast<unsigned char>(text[i]);
        size_t n = c < 0x80           ? 1
                   : (c >> 5) == 0x6  ? 2
                   : (c >> 4) == 0xE  ? 3
                   : (c >> 3) == 0x1E ? 4
                                      : 0;
        if (n == 0 || i + n > text.size()) return false;
        for (size_t k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) return false;
        i += n;
    }
    return true;
}

// The body of an answer that httplib made itself (unknown route, body too large, ...).
request_error error_for_status(const Request& req, int status, size_t max_body_bytes) {
    switch (status) {
    case 404:
        return request_error(404, "not_found_error",
                             "there is no route " + req.method + " " + req.path);
    case 413:
        return request_error(413, "invalid_request_error",
                             "the request body is larger than this server takes (" +
                                 std::to_string(max_body_bytes) + " bytes, --max-body-bytes)",
                             {}, "request_too_large");
    case 414:
        return request_error(414, "invalid_request_error", "the request URI is too long");
    case 400:
        return request_error(400, "invalid_request_error", "the HTTP request is malformed");
    default:
        return request_error(status, error_type_for_status(status),
                             "the request failed with HTTP status " + std::to_string(status));
    }
}

// One completion request from its submission until its response ends: what the content
// provider and the resource releaser share.
struct reply_stream {
    std::shared_ptr<generation_job> job;
    server_state* state = nullptr;
    reply_meta meta;
    request_kind kind = request_kind::chat;
    bool stream = false;
    bool include_usage = false;
    bool logprobs = false;
    std::string echo_text; // what the reply's text starts with (completions with echo)

    generation_update update;
    bool started = false;             // the first chunk is written (streams)
    bool ended = false;               // the generation finished (its last bytes are written)
    std::string text;                 // the reply so far (non-streaming)
    std::vector<token_output> tokens; // their logprobs, not yet reported
    size_t text_offset = 0;           // completions' logprobs text_offset of the next token
    std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();

    reply_stream(std::shared_ptr<generation_job> job_, server_state* state_)
        : job(std::move(job_)), state(state_) {
        state->counters->generation_started();
    }
    ~reply_stream() { state->counters->generation_ended(); }
    reply_stream(const reply_stream&) = delete;
    reply_stream& operator=(const reply_stream&) = delete;

    // Keeps each output's logprobs until they are reported.
    void collect(token_output& t) {
        if (logprobs && t.token >= 0) tokens.push_back(t);
    }

    json take_logprobs() {
        if (!logprobs || tokens.empty()) return nullptr;
        json out;
        if (kind == request_kind::chat) {
            out = chat_logprobs(state->model, tokens);
        } else {
            out = completion_logprobs(state->model, tokens, text_offset);
            for (const token_output& t : tokens)
                if (t.token >= 0) text_offset += token_piece(state->model, t.token).size();
        }
        tokens.clear();
        return out;
    }

    bool finished_normally() const {
        return update.finish == finish_reason::stop || update.finish == finish_reason::length;
    }

    request_error failure() const {
        if (update.finish == finish_reason::cancelled)
            return request_error(503, "unavailable_error",
                                 "the generation was stopped: the server is shutting down");
        return request_error(500, "server_error",
                             "the generation failed: " + (update.error.empty()
                                                              ? std::string("unknown error")
                                                              : update.error));
    }

    double ffn_active_fraction() const { return state->jobs->stats().ffn_active_fraction; }

    // One call of the streaming content provider: the chunks of what came since the last call.
    bool stream_step(httplib::DataSink& sink) {
        std::string out;
        if (!started) {
            started = true;
            if (kind == request_kind::chat)
                out += sse_event(chat_chunk(meta, {{"role", "assistant"}, {"content", ""}}, nullptr,
                                            finish_reason::none));
            else if (!echo_text.empty())
                out += sse_event(completion_chunk(meta, echo_text, nullptr, finish_reason::none));
        }
        job->channel.take(update, take_timeout);
        for (token_output& t : update.tokens) {
            collect(t);
            if (t.text.empty()) continue;
            json lp = take_logprobs();
            out += sse_event(
                kind == request_kind::chat
                    ? chat_chunk(meta, {{"content", t.text}}, std::move(lp), finish_reason::none)
                    : completion_chunk(meta, t.text, std::move(lp), finish_reason::none));
        }
        if (update.finish != finish_reason::none) {
            ended = true;
            if (finished_normally()) {
                json last = kind == request_kind::chat
                                ? chat_chunk(meta, json::object(), take_logprobs(), update.finish)
                                : completion_chunk(meta, "", take_logprobs(), update.finish);
                last["timings"] = timings_json(update.usage, ffn_active_fraction());
                out += sse_event(last);
                if (include_usage) out += sse_event(usage_chunk(meta, kind, update.usage));
            } else {
                out += sse_event(error_json(failure()));
            }
            out += sse_done;
        }
        if (!out.empty() && !sink.write(out.data(), out.size())) return false;
        if (ended) sink.done();
        return true;
    }

    // One call of the non-streaming content provider: collects the reply; writes it at the end.
    bool whole_step(httplib::DataSink& sink) {
        job->channel.take(update, take_timeout);
        for (token_output& t : update.tokens) {
            text += t.text;
            collect(t);
        }
        const auto now = std::chrono::steady_clock::now();
        if (update.finish == finish_reason::none) {
            if (now - last_write < keep_alive_interval) return true;
            last_write = now;
            return sink.write(" ", 1); // leading whitespace of the JSON to come
        }
        ended = true;
        std::string body;
        if (finished_normally()) {
            const std::string reply = echo_text + text;
            json lp = take_logprobs();
            body = json_text(kind == request_kind::chat
                                 ? chat_response(meta, reply, std::move(lp), update.finish,
                                                 update.usage, ffn_active_fraction())
                                 : completion_response(meta, reply, std::move(lp), update.finish,
                                                       update.usage, ffn_active_fraction()));
        } else {
            body = json_text(error_json(failure()));
        }
        if (!sink.write(body.data(), body.size())) return false;
        sink.done();
        return true;
    }
};

void check_prompt_length(const openai_request& r, const server_state& state) {
    const int64_t n_prompt = static_cast<int64_t>(r.prompt.size());
    const int32_t n_ctx_slot = state.jobs->n_ctx_per_slot();
    const char* param = r.kind == request_kind::chat ? "messages" : "prompt";
    if (n_prompt >= n_ctx_slot)
        throw request_error(413, "invalid_request_error",
                            "the prompt has " + std::to_string(n_prompt) +
                                " tokens; a slot holds " + std::to_string(n_ctx_slot) +
                                " positions for the prompt and the reply",
                            param, "context_length_exceeded");
    const int32_t limit = state.options->max_prompt_tokens;
    if (limit > 0 && n_prompt > limit)
        throw request_error(413, "invalid_request_error",
                            "the prompt has " + std::to_string(n_prompt) +
                                " tokens; this server takes at most " + std::to_string(limit) +
                                " (--max-prompt-tokens)",
                            param, "context_length_exceeded");
}

struct routes_context {
    server_state& state;
    std::atomic<uint64_t> next_id{1};
    explicit routes_context(server_state& s) : state(s) {}
};

void handle_generation(routes_context& rc, const Request& req, Response& res, request_kind kind) {
    server_state& state = rc.state;
    const json body = parse_json_body(req.body);
    request_context context;
    context.model = state.model;
    context.chat_template =
        state.options->chat_template.empty() ? nullptr : state.options->chat_template.c_str();
    context.default_max_tokens = state.options->default_max_tokens;
    openai_request r = kind == request_kind::chat ? parse_chat_request(body, context)
                                                  : parse_completion_request(body, context);
    check_prompt_length(r, state);

    auto job = std::make_shared<generation_job>();
    job->request.sampler = make_sampler(state.model, r);
    job->request.prompt = r.prompt;
    job->request.max_tokens = r.max_tokens;
    job->request.stop = r.stop;
    job->request.ignore_eos = r.ignore_eos;
    job->request.logprobs = r.logprobs;
    job->request.top_logprobs = r.top_logprobs;

    switch (state.jobs->submit(job)) {
    case submit_result::queued:
        break;
    case submit_result::queue_full:
        res.set_header("Retry-After", "1");
        throw request_error(429, "rate_limit_error",
                            "every slot is busy and the queue is full (--max-queue); try again "
                            "later",
                            {}, "queue_full");
    case submit_result::draining:
        throw request_error(503, "unavailable_error",
                            "the server is shutting down and takes no new requests");
    }

    auto reply = std::make_shared<reply_stream>(job, &state);
    reply->kind = kind;
    reply->meta.id = std::string(kind == request_kind::chat ? "chatcmpl-" : "cmpl-") +
                     std::to_string(rc.next_id.fetch_add(1));
    reply->meta.model = state.model_id;
    reply->meta.created = static_cast<int64_t>(std::time(nullptr));
    reply->stream = r.stream;
    reply->include_usage = r.include_usage;
    reply->logprobs = r.logprobs;
    reply->echo_text = r.echo ? r.echo_text : std::string();
    reply->text_offset = reply->echo_text.size();

    const auto provider = [reply](size_t, httplib::DataSink& sink) {
        try {
            return reply->stream ? reply->stream_step(sink) : reply->whole_step(sink);
        } catch (...) {
            return false; // the releaser cancels the generation
        }
    };
    // httplib calls this when the response ends, however it ends: a generation that had not
    // finished lost its client.
    const auto releaser = [reply](bool) {
        if (reply->ended) return;
        reply->job->channel.cancel();
        reply->state->counters->count_cancelled();
    };
    res.status = 200;
    if (r.stream) {
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Accel-Buffering", "no"); // a reverse proxy must not hold the chunks
        res.set_chunked_content_provider("text/event-stream", provider, releaser);
    } else {
        res.set_chunked_content_provider("application/json", provider, releaser);
    }
}

void handle_tokenize(const server_state& state, const Request& req, Response& res) {
    const tokenize_request t = parse_tokenize_request(parse_json_body(req.body));
    const uint32_t flags = (t.add_special ? PI_TOKENIZE_ADD_BOS : 0u) |
                           (t.parse_special ? PI_TOKENIZE_PARSE_SPECIAL : 0u);
    const std::vector<pi_token> tokens = tokenize_text(state.model, t.content, flags);
    json out = json::array();
    for (const pi_token id : tokens) {
        if (!t.with_pieces) {
            out.push_back(id);
            continue;
        }
        // A piece that is part of a character cannot be a JSON string: llama.cpp sends its bytes.
        const std::string piece = token_piece(state.model, id);
        json bytes = json::array();
        if (!valid_utf8(piece))
            for (const char c : piece)
                bytes.push_back(static_cast<unsigned char>(c));
        out.push_back({{"id", id}, {"piece", valid_utf8(piece) ? json(piece) : bytes}});
    }
    send_json(res, 200, {{"tokens", std::move(out)}});
}

void handle_models(const server_state& state, Response& res) {
    pi_model_info info{};
    info.struct_size = sizeof info;
    if (pi_model_info_get(state.model, &info) != PI_OK)
        throw request_error(500, "server_error",
                            std::string("the model's facts cannot be read: ") + pi_last_error());
    json model = {{"id", state.model_id},
                  {"object", "model"},
                  {"created", state.created},
                  {"owned_by", "powerinfer"},
                  {"meta",
                   {{"n_vocab", info.n_vocab},
                    {"n_ctx_train", info.n_ctx_train},
                    {"n_ctx_slot", state.jobs->n_ctx_per_slot()},
                    {"n_slots", state.jobs->n_slots()}}}};
    send_json(res, 200, {{"object", "list"}, {"data", json::array({std::move(model)})}});
}

void register_wrong_methods(Server& server, const char* path, bool get_route) {
    const std::string allowed = get_route ? "GET" : "POST";
    const auto wrong = [allowed](const Request& req, Response& res) {
        res.set_header("Allow", allowed);
        send_error(
            res, request_error(405, "invalid_request_error",
                               req.method + " is not allowed on " + req.path + ": use " + allowed));
    };
    if (get_route)
        server.Post(path, Server::Handler(wrong));
    else
        server.Get(path, wrong);
    server.Put(path, Server::Handler(wrong));
    server.Patch(path, Server::Handler(wrong));
    server.Delete(path, Server::Handler(wrong));
}

} // namespace

void register_routes(httplib::Server& server, server_state& state) {
    const auto rc = std::make_shared<routes_context>(state);
    server_state* s = &state;

    server.set_payload_max_length(state.options->max_body_bytes);

    server.set_pre_routing_handler([s](const Request& req, Response& res) {
        // Browser clients on other origins (and their preflight requests) may call the API; the
        // API key, not the origin, guards it.
        res.set_header("Access-Control-Allow-Origin", "*");
        if (req.method == "OPTIONS") return Server::HandlerResponse::Unhandled;
        const bool open_route = (req.method == "GET" || req.method == "HEAD") &&
                                (req.path == "/" || req.path == "/health");
        Server::HandlerResponse verdict = Server::HandlerResponse::Unhandled;
        if (s->draining.load()) {
            if (req.path == "/health")
                send_json(res, 503, {{"status", "draining"}});
            else
                send_error(res, request_error(503, "unavailable_error",
                                              "the server is shutting down and takes no new "
                                              "requests"));
            verdict = Server::HandlerResponse::Handled;
        } else if (!s->options->api_key.empty() && !open_route &&
                   !authorized(req, s->options->api_key)) {
            res.set_header("WWW-Authenticate", "Bearer");
            send_error(res, request_error(401, "authentication_error",
                                          "a valid API key is needed: send 'Authorization: "
                                          "Bearer KEY' or 'X-Api-Key: KEY'",
                                          {}, "invalid_api_key"));
            verdict = Server::HandlerResponse::Handled;
        }
        // The body of a request answered here is never read: the connection cannot carry the
        // next request.
        if (verdict == Server::HandlerResponse::Handled && has_body(req))
            res.set_header("Connection", "close");
        return verdict;
    });

    // Answers httplib made without a body (unknown route, body too large) get the JSON error;
    // answers the routes made keep theirs.
    server.set_error_handler(Server::HandlerWithResponse([s](const Request& req, Response& res) {
        if (!res.body.empty()) return Server::HandlerResponse::Unhandled;
        send_error(res, error_for_status(req, res.status, s->options->max_body_bytes));
        return Server::HandlerResponse::Handled;
    }));

    server.set_exception_handler([](const Request&, Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
            if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {
        }
        send_error(res, internal_error(what.c_str()));
    });

    server.set_logger([s](const Request& req, const Response& res) {
        s->counters->count_request(route_label(req.path), res.status);
        if (s->options->verbose)
            std::fprintf(stderr, "pi-server: %s %s %d\n", req.method.c_str(), req.path.c_str(),
                         res.status);
    });

    server.Get("/", [](const Request&, Response& res) {
        const std::string_view page = chat_page_html();
        res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
    });

    server.Get("/health", guarded([s](const Request&, Response& res) {
                   const scheduler_stats stats = s->jobs->stats();
                   send_json(res, 200,
                             {{"status", "ok"},
                              {"slots_idle", stats.n_slots - stats.slots_busy},
                              {"slots_processing", stats.slots_busy}});
               }));

    server.Get("/v1/models",
               guarded([s](const Request&, Response& res) { handle_models(*s, res); }));

    server.Get("/metrics", guarded([s](const Request&, Response& res) {
                   res.set_content(s->counters->prometheus_text(s->jobs->stats()),
                                   prometheus_content_type);
               }));

    server.Post("/v1/chat/completions", guarded([rc](const Request& req, Response& res) {
                    handle_generation(*rc, req, res, request_kind::chat);
                }));

    server.Post("/v1/completions", guarded([rc](const Request& req, Response& res) {
                    handle_generation(*rc, req, res, request_kind::completion);
                }));

    server.Post("/v1/embeddings", guarded([](const Request&, Response& res) {
                    send_error(res, request_error(404, "not_found_error",
                                                  "this model does not offer embeddings"));
                }));

    server.Post("/tokenize",
                guarded([s](const Request& req, Response& res) { handle_tokenize(*s, req, res); }));

    server.Post("/detokenize", guarded([s](const Request& req, Response& res) {
                    const std::vector<pi_token> tokens =
                        parse_detokenize_request(parse_json_body(req.body), s->model);
                    send_json(res, 200, {{"content", detokenize_tokens(s->model, tokens)}});
                }));

    for (const char* path : get_routes)
        register_wrong_methods(server, path, true);
    for (const char* path : post_routes)
        register_wrong_methods(server, path, false);

    server.Options(".*", [](const Request&, Response& res) {
        res.status = 204;
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
        res.set_header("Access-Control-Max-Age", "86400");
    });
}

} // namespace pi_server
