#include "report_conversation.hpp"

#include <cmath>
#include <cstdint>

#include "report_format.hpp"

namespace pi::bench {

void markdown_parallel(const report& r, std::FILE* out) {
    bool header = false;
    for (const run_result& run : r.runs) {
        if (!run.parallel) continue;
        if (!header) {
            std::fputs("\n| model | mode | threads | sequences | prompt per sequence | steps | "
                       "aggregate t/s | one sequence t/s | aggregate / one |\n",
                       out);
            std::fputs("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n", out);
            header = true;
        }
        const parallel_result& p = *run.parallel;
        std::fprintf(out, "| %s | %s | %d | %d | %d | %d | %s | %s | %s |\n",
                     model_cell(run.model).c_str(), mode_name(run.run_mode), run.threads,
                     p.n_sequences, p.n_prompt, p.n_gen,
                     speed(p.aggregate_tokens_per_second).c_str(),
                     speed(p.single_tokens_per_second).c_str(), fixed(p.ratio(), 2).c_str());
    }
}

void markdown_chat_turns(const report& r, std::FILE* out) {
    for (const run_result& run : r.runs) {
        if (run.chat_turns.empty()) continue;
        std::fprintf(out,
                     "\nChat, %s %s, %d threads (each turn sends the whole transcript, "
                     "pi_generate reuses the cache):\n\n",
                     model_cell(run.model).c_str(), mode_name(run.run_mode), run.threads);
        std::fputs("| turn | prompt tokens | cached | new | prompt ms | new tokens/s | reply "
                   "tokens | decode t/s | MB/token | tg at that depth | decode / tg |\n",
                   out);
        std::fputs("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
                   "|\n",
                   out);
        for (const chat_turn_result& t : run.chat_turns) {
            const double ms = t.prompt_ms.median;
            const double depth = t.depth_tokens_per_second.median;
            std::fprintf(
                out, "| %d | %d | %d | %d | %s | %s | %d | %s | %s | %s | %s |\n", t.turn,
                t.prompt_tokens, t.cached_tokens, t.new_tokens(), speed(t.prompt_ms).c_str(),
                fixed(ms > 0 ? 1e3 * t.new_tokens() / ms : NAN, 1).c_str(), t.generated_tokens,
                speed(t.decode_tokens_per_second).c_str(),
                fixed(t.decode_bytes_per_token / 1e6, 1).c_str(),
                speed(t.depth_tokens_per_second).c_str(),
                fixed(depth > 0 ? t.decode_tokens_per_second.median / depth : NAN, 2).c_str());
        }
    }
}

void json_conversation(json_writer& j, const run_result& run) {
    j.key("parallel");
    if (run.parallel) {
        const parallel_result& p = *run.parallel;
        j.begin_object();
        json_integers(
            j, {{"n_sequences", p.n_sequences}, {"n_prompt", p.n_prompt}, {"n_gen", p.n_gen}});
        j.key("aggregate_tokens_per_second");
        json_summary(j, p.aggregate_tokens_per_second);
        j.key("single_tokens_per_second");
        json_summary(j, p.single_tokens_per_second);
        j.key("ratio");
        j.number(p.ratio());
        j.end_object();
    } else {
        j.null();
    }
    j.key("chat_turns");
    j.begin_array();
    for (const chat_turn_result& t : run.chat_turns) {
        j.begin_object();
        json_integers(j, {{"turn", t.turn},
                          {"prompt_tokens", t.prompt_tokens},
                          {"cached_tokens", t.cached_tokens},
                          {"new_tokens", t.new_tokens()},
                          {"generated_tokens", t.generated_tokens}});
        j.key("prompt_ms");
        json_summary(j, t.prompt_ms);
        j.key("decode_tokens_per_second");
        json_summary(j, t.decode_tokens_per_second);
        j.key("decode_bytes_per_token");
        j.number(t.decode_bytes_per_token);
        j.key("depth_tokens_per_second");
        json_summary(j, t.depth_tokens_per_second);
        j.end_object();
    }
    j.end_array();
}

} // namespace pi::bench
