// POST /v1/chat/completions: parse and validate on the handler thread, run the turn on the engine
// thread, answer as one chat.completion or as a stream of chunks (docs/server.md).
#include "core/base/cancelled.h"
#include "core/engine/result_json.h"
#include "core/serve/peer_socket.h"
#include "core/serve/server_impl.h"

#include <condition_variable>
#include <mutex>

namespace cc::serve {
namespace {

int64_t unix_s_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The conversation as the engine takes it: the group (tools + the leading system message) and the
// messages after it.
struct ChatInput {
    ToolSet tools;
    Conversation conversation;
};

ChatInput chat_input(const ChatCompletionRequest& r) {
    ChatInput in;
    if (r.tools) in.tools = tools_from_body(*r.tools, "tools");
    check_tool_choice(r.tool_choice, in.tools.names());
    try {
        check_strict_tools(in.tools, false);  // "strict": true on a tool whose schema the matcher cannot follow
    } catch (const std::invalid_argument& e) {
        throw ApiError(400, e.what(), "tools", "invalid_value");
    }
    try {
        in.conversation = parse_openai_messages(r.messages, "messages");
    } catch (const std::invalid_argument& e) {
        throw ApiError(400, e.what(), "messages", "invalid_value");
    }
    if (in.conversation.messages.empty())
        throw ApiError(400, "'messages' holds no message after the system message.", "messages", "invalid_value");
    return in;
}

// What the token callback shares with the handler thread that streams.
struct StreamState {
    std::mutex mutex;
    std::condition_variable cv;
    std::string text;          // all generated text so far
    size_t n_tokens = 0;
    bool finished = false;     // the job's function has returned (or thrown)
    ChatOutcome outcome;       // valid once finished without error
    RequestLogEntry log;       // the engine's part of the log entry
};

// The reply as the protocol sends it. With tools offered and tool_choice auto, required or a named
// function, the engine's parsed reply gives content, thinking and tool calls; a call whose
// arguments are not a JSON object is not a call, and the whole text is content (the constraint
// forces a call's opening and name; its arguments only for tools marked "strict": true). With
// tool_choice none the text is content as written.
ChatOutcome make_outcome(const QueryResult& r, const ChatCompletionRequest& req, const ToolSet& tools,
                         const std::string& chat_format, double queue_ms, size_t running_at_start) {
    ChatOutcome o;
    const bool want_calls = req.tool_choice.mode != ToolChoice::Mode::none && !tools.empty();
    const auto call_markup = make_chat_format(chat_format)->tool_call_markup();
    if (want_calls && req.tool_choice.forces_call() && r.reply && !r.reply->tool_calls.empty() && call_markup) {
        // A forced call is a call by construction (its opening and name were fed or masked):
        // reported as one even when the arguments the model wrote do not parse -- as OpenAI's
        // non-strict function calling, whose arguments may be invalid JSON too.
        o.content = r.reply->content;
        o.reasoning_content = r.reply->reasoning_content;
        for (size_t i = 0; i < r.reply->tool_calls.size(); ++i) {
            const auto& call = r.reply->tool_calls[i];
            std::string arguments = call.arguments_text.value_or(call.arguments.dump());
            if (i == 0 && !r.reply->tool_calls_valid) {
                arguments = forced_call_arguments(*call_markup, r.text, call.name, nullptr);
                o.content.clear();  // the unparsed text is the call's, not content
            } else if (i > 0 && !r.reply->tool_calls_valid) {
                break;  // only the forced first call is taken as written
            }
            o.tool_calls.push_back({make_tool_call_id(chat_format == "mistral"), call.name, std::move(arguments)});
        }
        // Cut off by max_tokens (the call may be unfinished): "length", as OpenAI.
        o.finish_reason = r.stop_reason == StopReason::max_new_tokens ? "length" : "tool_calls";
    } else if (want_calls && r.reply && !r.reply->tool_calls.empty() && r.reply->tool_calls_valid) {
        o.content = r.reply->content;
        o.reasoning_content = r.reply->reasoning_content;
        for (const auto& call : r.reply->tool_calls)
            o.tool_calls.push_back({call.id.empty() ? make_tool_call_id(chat_format == "mistral") : call.id, call.name,
                                    call.arguments_text.value_or(call.arguments.dump())});
        o.finish_reason = "tool_calls";
    } else {
        o.content = r.text;
        o.finish_reason = r.stop_reason == StopReason::max_new_tokens ? "length" : "stop";
    }
    o.prompt_tokens = r.prompt_tokens;
    o.completion_tokens = r.generated_tokens;
    o.cached_tokens = r.group_reused_tokens + r.conversation_reused_tokens;
    ordered_json cc;
    cc["group_key"] = r.group_key;
    cc["tools_hash"] = tools.tools_hash();
    cc["tier"] = tier_name(r.tier);
    cc["cache_hit"] = r.cache_hit;
    cc["prompt_tokens"] = r.prompt_tokens;
    cc["group_reused_tokens"] = r.group_reused_tokens;
    cc["conversation_reused_tokens"] = r.conversation_reused_tokens;
    cc["conversation_tier"] = tier_name(r.conversation_tier);
    cc["prefilled_tokens"] = r.prefilled_tokens;
    cc["tool_choice"] = req.tool_choice.text();
    cc["forced_tokens"] = r.forced_tokens;  // the call's opening fed by the tool_choice constraint
    cc["diverged_at"] = r.diverged_at ? ordered_json(*r.diverged_at) : ordered_json(nullptr);
    cc["miss_reason"] = miss_reason_json(r.miss_reason, r.prefix_tokens);
    cc["queue_ms"] = queue_ms;
    // The shared steps that ran this request (continuous batching): how many, and how many
    // requests shared them; running_at_start: requests running when it started, itself included.
    cc["batch"] = ordered_json{{"running_at_start", running_at_start},
                               {"steps", r.batch.steps},
                               {"max_sequences", r.batch.max_sequences},
                               {"mean_sequences", r.batch.mean_sequences()},
                               {"max_rows", r.batch.max_rows},
                               {"step_wait_ms", r.batch.wait_ms}};
    cc["timings"] = to_json(r.timings);
    o.contextcache = std::move(cc);
    return o;
}

void fill_log(RequestLogEntry& log, const QueryResult& r, const ChatOutcome& o) {
    log.tier = r.tier;
    log.group_key = r.group_key;
    log.compile_ms = r.timings.compile_ms;
    log.link_ms = r.timings.link_ms;
    log.prefill_ms = r.timings.prefill_ms;
    log.ttft_ms = r.timings.ttft_ms;
    log.batch_sequences = r.batch.max_sequences;
    log.decode_ms = r.timings.decode_ms;
    log.prompt_tokens = o.prompt_tokens;
    log.cached_tokens = o.cached_tokens;
    log.prefilled_tokens = r.prefilled_tokens;
    log.generated_tokens = o.completion_tokens;
}
// The engine's fields of a log entry (tier, timings, tokens); the HTTP fields stay.
void copy_engine_part(RequestLogEntry& to, const RequestLogEntry& from) {
    to.tier = from.tier;
    to.group_key = from.group_key;
    to.link_ms = from.link_ms;
    to.compile_ms = from.compile_ms;
    to.prefill_ms = from.prefill_ms;
    to.ttft_ms = from.ttft_ms;
    to.decode_ms = from.decode_ms;
    to.prompt_tokens = from.prompt_tokens;
    to.cached_tokens = from.cached_tokens;
    to.prefilled_tokens = from.prefilled_tokens;
    to.generated_tokens = from.generated_tokens;
    to.batch_sequences = from.batch_sequences;
}

}  // namespace

void Server::Impl::chat_completions(Call& call, httplib::Response& res) {
    const auto body = parse_body(call.req);
    const ChatCompletionRequest req = parse_chat_request(body, options.max_tokens_limit);
    auto input = std::make_shared<ChatInput>(chat_input(req));
    auto request = std::make_shared<ChatCompletionRequest>(req);
    call.log.stream = req.stream;

    QueryOptions q;
    q.max_new_tokens = req.max_tokens.value_or(options.default_max_tokens);
    q.temperature = req.temperature.value_or(0.0f);
    q.top_p = req.top_p.value_or(1.0f);
    q.seed = req.seed.value_or(0);
    q.tool_choice = req.tool_choice;

    const std::string chat_format = worker.model_info().chat_format;
    auto st = std::make_shared<StreamState>();
    q.stop = req.stop;  // the engine ends at a stop string and cuts the text before it
    auto job = submit([input, request, q, st, chat_format](Engine& engine, Job& job) {
        struct Finished {  // wakes the streaming thread however the job ends
            StreamState& st;
            ~Finished() {
                {
                    std::lock_guard lock(st.mutex);
                    st.finished = true;
                }
                st.cv.notify_all();
            }
        } finished{*st};
        ChatRequest chat;
        chat.tools = input->tools;
        chat.system_prompt = input->conversation.system_prompt;
        chat.messages = input->conversation.messages;
        const QueryResult r = engine.chat(chat, q, [&](const TokenEvent& ev) {
            {
                std::lock_guard lock(st->mutex);
                st->text += ev.text;
                ++st->n_tokens;
            }
            st->cv.notify_all();
        });
        if (job.cancelled()) throw Cancelled();
        ChatOutcome o = make_outcome(r, *request, input->tools, chat_format, job.queue_ms(), job.running_at_start());
        std::lock_guard lock(st->mutex);
        fill_log(st->log, r, o);
        st->outcome = std::move(o);
    }, /*exclusive=*/false);

    const std::string id = make_completion_id();
    const int64_t created = unix_s_now();
    if (!req.stream) {
        await(call, job);
        std::lock_guard lock(st->mutex);
        copy_engine_part(call.log, st->log);
        reply_json(res, 200, completion_json(id, created, model_id, system_fingerprint, st->outcome));
        return;
    }

    // Streaming: wait for the first token (or the end) before committing to 200, so that an error
    // in rendering or prefill is still an ordinary error reply.
    await(call, job, [st](std::chrono::milliseconds timeout) {
        std::unique_lock lock(st->mutex);
        return st->cv.wait_for(lock, timeout, [&] { return st->finished || st->n_tokens > 0; });
    });

    // The routing header (route() sets it from call.log.group_key) goes out with the stream's
    // headers, before the engine's result exists: the key is the one Engine::chat reports, computed
    // the same way from the same tool set and system prompt.
    {
        const ModelInfo& info = worker.model_info();
        call.log.group_key = engine_group_key(info.fingerprint, info.chat_format, info.numerics, input->tools,
                                              input->conversation.system_prompt);
    }

    // From here the handler has returned; the provider runs on the same thread while the response
    // is written, and owns everything it needs.
    call.log.status = -1;  // the provider records the entry
    struct Ctx {
        Impl* self;
        std::shared_ptr<Job> job;
        std::shared_ptr<StreamState> st;
        std::shared_ptr<ChatCompletionRequest> request;
        ChatStream stream;
        ContentHoldback holdback;
        RequestLogEntry log;
        std::chrono::steady_clock::time_point begun, deadline;
        std::string remote_addr;
        int remote_port, local_port;
        size_t consumed = 0;  // of st->text
        bool recorded = false;  // the log entry was written (the stream ended one way or another)
    };
    std::vector<std::string> markers = req.tool_choice.mode != ToolChoice::Mode::none && !input->tools.empty()
                                           ? tool_call_markers(chat_format)
                                           : std::vector<std::string>{};
    for (const auto& s : req.stop) markers.push_back(s);
    auto ctx = std::make_shared<Ctx>(Ctx{this, job, st, request,
                                         ChatStream(id, created, model_id, system_fingerprint, req.include_usage),
                                         ContentHoldback(markers), call.log, call.begun, call.deadline,
                                         call.req.remote_addr, call.req.remote_port, call.req.local_port});
    ctx->log.status = 0;
    ctx->log.queue_ms = job->queue_ms();

    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider("text/event-stream", [ctx](size_t, httplib::DataSink& sink) {
        auto& c = *ctx;
        const auto record = [&](int status, const std::string& error) {
            c.recorded = true;
            c.log.status = status;
            c.log.error = error;
            c.log.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c.begun).count();
            c.log.unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
            c.self->stats.record(c.log);
        };
        const auto abandon = [&](int status, const std::string& why) {
            c.self->worker.cancel(c.job);
            c.job->wait();
            record(status, why);
        };
        if (!sink.write(c.stream.begin().data(), c.stream.begin().size())) {
            abandon(499, "client closed the stream");
            return false;
        }
        const PeerSocket peer(c.remote_addr, c.remote_port, c.local_port);
        for (;;) {
            std::string fresh;
            bool finished = false;
            {
                std::unique_lock lock(c.st->mutex);
                c.st->cv.wait_for(lock, std::chrono::milliseconds(20),
                                  [&] { return c.st->finished || c.st->text.size() > c.consumed; });
                fresh = c.st->text.substr(c.consumed);
                c.consumed = c.st->text.size();
                finished = c.st->finished;
            }
            if (!fresh.empty()) {
                const std::string out = c.holdback.push(fresh);
                if (!out.empty()) {
                    const std::string ev = c.stream.content(out);
                    if (!sink.write(ev.data(), ev.size())) {
                        abandon(499, "client closed the stream");
                        return false;
                    }
                }
            }
            if (finished) break;
            if (peer.closed()) {
                abandon(499, "client closed the stream");
                return false;
            }
            if (std::chrono::steady_clock::now() >= c.deadline) {
                c.self->worker.cancel(c.job);
                c.job->wait();
                const ApiError e(408, "The request was not answered within the server's timeout and was cancelled.", "",
                                 "request_timeout", "timeout_error");
                const std::string ev = ChatStream::error(e);
                sink.write(ev.data(), ev.size());
                sink.done();
                record(408, e.what());
                return true;
            }
        }
        c.job->wait();
        std::string tail;
        try {
            Impl::rethrow_job_error(c.job);
            std::lock_guard lock(c.st->mutex);
            const ChatOutcome& o = c.st->outcome;
            // Content the holdback kept that the parsed reply says is content after all.
            if (o.content.size() > c.holdback.sent().size() && o.content.starts_with(c.holdback.sent()))
                tail += c.stream.content(o.content.substr(c.holdback.sent().size()));
            if (!o.tool_calls.empty()) tail += c.stream.tool_calls(o.tool_calls);
            tail += c.stream.finish(o);
            copy_engine_part(c.log, c.st->log);
        } catch (const ApiError& e) {
            const std::string ev = ChatStream::error(e);
            sink.write(ev.data(), ev.size());
            sink.done();
            record(e.status, e.what());
            return true;
        }
        if (!sink.write(tail.data(), tail.size())) {
            record(499, "client closed the stream");
            return false;
        }
        sink.done();
        record(200, {});
        return true;
    },
    // Released however the response ends; if the provider never ran to an end (the connection
    // failed before the body), the job must not run on for nobody.
    [ctx](bool) {
        auto& c = *ctx;
        if (c.recorded) return;
        c.self->worker.cancel(c.job);
        c.job->wait();
        c.log.status = 499;
        c.log.error = "the connection ended before the stream";
        c.log.unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
        c.self->stats.record(c.log);
    });
}

}  // namespace cc::serve
