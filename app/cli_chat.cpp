// contextcache-cli chat: a conversation (OpenAI-style messages) answered with exact reuse of the
// group prefix and of the turns before (Engine::chat). Three ways to run it:
//   --messages FILE          answer the last turn (one request)
//   --messages FILE --each-turn
//                            replay: a request at every assistant turn of the file and at the end,
//                            each after the previous, so conversation reuse grows turn by turn
//   -i | --interactive       type user turns; paste tool results when the model calls a tool
#include "app/cli_common.h"

#include "core/engine/result_json.h"
#include "core/engine/tool_call_ids.h"
#include "core/text/conversation.h"

#include <iostream>

namespace cli {
namespace {

struct ChatInput {
    cc::ToolSet tools;
    cc::Conversation conversation;
};

// --messages FILE: an array of messages, or an object {"messages": [...], "tools": [...]?} (a
// chat-completions request body); --tools FILE wins over the body's tools.
ChatInput read_chat_input(Args& args) {
    ChatInput in;
    const auto tools_path = args.get("tools");
    const auto messages_path = args.get("messages");
    std::optional<cc::ToolSet> body_tools;
    if (messages_path) {
        const std::string text = read_file(*messages_path);
        ordered_json body;
        try {
            body = ordered_json::parse(text);
        } catch (const nlohmann::json::parse_error& e) {
            throw std::runtime_error(*messages_path + ": not valid JSON: " + e.what());
        }
        const ordered_json* messages = &body;
        if (body.is_object()) {
            if (!body.contains("messages")) throw std::runtime_error(*messages_path + ": an object needs \"messages\"");
            messages = &body["messages"];
            if (body.contains("tools") && !body["tools"].is_null())
                body_tools = cc::ToolSet::from_json_text(body["tools"].dump(), *messages_path + ": tools");
        }
        in.conversation = cc::parse_openai_messages(*messages, *messages_path + ": messages");
    }
    if (tools_path) in.tools = cc::ToolSet::from_file(*tools_path);
    else if (body_tools) in.tools = std::move(*body_tools);
    const std::string system = system_prompt(args);
    if (!system.empty()) {
        if (!in.conversation.system_prompt.empty())
            throw UsageError("the messages already begin with a system message; drop --system or that message");
        in.conversation.system_prompt = system;
    }
    return in;
}

void print_turn_human(const cc::QueryResult& r, size_t turn) {
    const auto& t = r.timings;
    if (r.reply) {
        if (!r.reply->content.empty()) std::cout << r.reply->content << "\n";
        for (const auto& c : r.reply->tool_calls) std::cout << "tool call: " << c.name << " " << c.arguments.dump() << "\n";
    } else {
        std::cout << r.text << "\n";
    }
    std::cout << "[turn " << turn << ", " << r.mode << "] prompt " << r.prompt_tokens << " tokens = group "
              << r.group_reused_tokens << " (" << r.tier << ") + conversation " << r.conversation_reused_tokens << " ("
              << r.conversation_tier << ") + prefilled " << r.prefilled_tokens;
    if (r.diverged_at) std::cout << "; stored state diverged at " << *r.diverged_at;
    std::cout << "; " << r.generated_tokens << " generated (" << cc::stop_reason_name(r.stop_reason) << ")\n"
              << "ttft " << t.ttft_ms << " ms = link " << t.link_ms << " + compile " << t.compile_ms << " + prefill "
              << t.prefill_ms << " (+ tokenize " << t.tokenize_ms << "); decode " << t.decode_ms << " ms; total "
              << t.total_ms << " ms\n";
    if (r.identical) {
        std::cout << "compare: " << (*r.identical ? "identical" : "DIFFERENT") << ", max |d logit| " << r.max_abs_logit_diff;
        if (r.full) std::cout << "; full prefill ttft " << r.full->timings.ttft_ms << " ms";
        std::cout << "\n";
    }
}

// The reply as the next turn's assistant message, its calls given ids.
cc::ChatMessage reply_message(const cc::QueryResult& r, cc::ToolCallIds& ids, const std::string& format) {
    cc::ChatMessage m = cc::assistant_message(*r.reply);
    for (auto& c : m.tool_calls) c.id = ids.next(format);
    return m;
}

int run_interactive(cc::Engine& engine, const ChatInput& in, const cc::QueryOptions& q, const cc::RenderOptions& render,
                    bool json) {
    cc::ChatRequest request{in.tools, in.conversation.system_prompt, in.conversation.messages, render};
    cc::ToolCallIds ids(0x5eed);
    const std::string format = engine.model_info().chat_format;
    if (!json)
        std::cerr << "chat: type a message; a tool call asks for its result; /reset starts over, /quit ends\n";
    size_t turn = 0;
    std::string line;
    const auto answer = [&]() {
        cc::QueryResult r = engine.chat(request, q);
        ++turn;
        if (json) {
            auto j = cc::to_json(r);
            j["turn"] = turn;
            std::cout << j.dump() << std::endl;  // JSON lines
        } else {
            print_turn_human(r, turn);
        }
        request.messages.push_back(reply_message(r, ids, format));
        return request.messages.back();
    };
    while (true) {
        if (!json) std::cerr << "> " << std::flush;
        if (!std::getline(std::cin, line) || line == "/quit") break;
        if (line == "/reset") {
            request.messages = in.conversation.messages;
            turn = 0;
            continue;
        }
        request.messages.push_back(cc::ChatMessage::user(line));
        cc::ChatMessage reply = answer();
        // A tool call: its result is the next input, and the model answers again.
        while (!reply.tool_calls.empty()) {
            for (const auto& call : reply.tool_calls) {
                if (!json) std::cerr << "result of " << call.name << " (" << call.id << ")> " << std::flush;
                if (!std::getline(std::cin, line)) return 0;
                request.messages.push_back(cc::ChatMessage::tool_result(call.id, line));
            }
            reply = answer();
        }
    }
    report_warnings(engine);
    return 0;
}

}  // namespace

int cmd_chat(Args& args, const cc::EngineOptions& options, bool json) {
    const bool interactive = args.flag("interactive");
    const bool each_turn = args.flag("each-turn");
    cc::QueryOptions q;
    try {
        q.mode = cc::parse_query_mode(args.get_or("mode", "cached"));
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--") + e.what());
    }
    if (auto v = args.get("max-new-tokens")) q.max_new_tokens = static_cast<int>(parse_int(*v, "--max-new-tokens", 1, 1 << 20));
    if (auto v = args.get("temperature")) q.temperature = static_cast<float>(parse_double(*v, "--temperature", 0, 100));
    if (auto v = args.get("seed")) q.seed = static_cast<uint64_t>(parse_int(*v, "--seed", 0, INT64_MAX));
    q.ignore_eos = args.flag("ignore-eos");
    q.tool_choice = tool_choice_arg(args);
    const bool thinking = args.flag("thinking");
    if (!interactive && !args.has("messages")) throw UsageError("chat needs --messages FILE or -i");
    ChatInput in = read_chat_input(args);
    args.check_all_used();

    cc::Engine engine(options);
    engine.load_model();
    cc::RenderOptions render;
    render.enable_thinking = thinking;
    if (interactive) return run_interactive(engine, in, q, render, json);
    if (in.conversation.messages.empty()) throw std::runtime_error("--messages: the conversation has no messages after the system prompt");

    // The requests to make: the whole conversation, or (--each-turn) every prefix that ends just
    // before an assistant message, then the whole.
    std::vector<size_t> ends;
    if (each_turn)
        for (size_t i = 1; i < in.conversation.messages.size(); ++i)
            if (in.conversation.messages[i].role == cc::ChatMessage::Role::assistant &&
                in.conversation.messages[i - 1].role != cc::ChatMessage::Role::assistant)
                ends.push_back(i);
    if (in.conversation.messages.back().role != cc::ChatMessage::Role::assistant || !each_turn)
        ends.push_back(in.conversation.messages.size());

    std::vector<cc::QueryResult> turns;
    for (size_t end : ends) {
        cc::ChatRequest request{in.tools, in.conversation.system_prompt,
                                {in.conversation.messages.begin(), in.conversation.messages.begin() + static_cast<std::ptrdiff_t>(end)},
                                render};
        turns.push_back(engine.chat(request, q));
    }
    engine.wait_for_persist();
    report_warnings(engine);
    if (json) {
        if (!each_turn) {
            print_json(cc::to_json(turns.back()));
        } else {
            ordered_json out{{"turns", ordered_json::array()}};
            for (const auto& t : turns) out["turns"].push_back(cc::to_json(t));
            print_json(out);
        }
    } else {
        if (engine.model_info().synthetic_weights)
            std::cout << "(" << engine.model_info().spec
                      << ": synthetic weights - timings and exactness are real, the text is not meaningful)\n";
        for (size_t i = 0; i < turns.size(); ++i) print_turn_human(turns[i], i + 1);
    }
    for (const auto& r : turns)
        if (r.identical && !*r.identical) return 3;
    return 0;
}

}  // namespace cli
