//! The prompt of a turn: the session's history through the model's own chat template,
//! tokenized, with the oldest turns left out when it would not fit the window.

use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::token::LlamaToken;

use convo_wire::Role;

/// One message of the history, as the engine receives it.
#[derive(Debug, Clone)]
pub struct Turn {
    pub role: Role,
    pub content: String,
}

/// The model's chat template, or ChatML (which llama.cpp knows by name) when the file has
/// none.
pub fn template(model: &LlamaModel) -> LlamaChatTemplate {
    model
        .chat_template(None)
        .ok()
        .or_else(|| LlamaChatTemplate::new("chatml").ok())
        .expect("\"chatml\" has no NUL byte")
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::System => "system",
    }
}

/// The prompt text of `turns`, ending with the opening of the assistant's reply.
fn render(
    model: &LlamaModel,
    template: &LlamaChatTemplate,
    turns: &[&Turn],
) -> Result<String, String> {
    let messages = turns
        .iter()
        .map(|t| {
            // A C string cannot hold NUL; the model would not have seen it anyway.
            LlamaChatMessage::new(role_name(t.role).into(), t.content.replace('\0', ""))
                .map_err(|e| format!("cannot build the prompt: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    model
        .apply_chat_template(template, &messages, true)
        .map_err(|e| format!("the model's chat template failed: {e}"))
}

/// Tokens of the prompt for `history` that leave `reserve` tokens for the reply within
/// `window`. When the whole history does not fit, the oldest messages that are not system
/// messages are left out (the newest message always stays); when even that does not fit,
/// the error says so.
pub fn tokens(
    model: &LlamaModel,
    template: &LlamaChatTemplate,
    history: &[Turn],
    window: usize,
    reserve: usize,
) -> Result<Vec<LlamaToken>, String> {
    let budget = window.saturating_sub(reserve.min(window / 2)).max(1);
    let vocab = model.vocab();
    let encode = |turns: &[&Turn]| -> Result<Vec<LlamaToken>, String> {
        let text = render(model, template, turns)?;
        Ok(vocab.tokenize(text.as_bytes(), vocab.should_add_bos(), true))
    };
    let all: Vec<&Turn> = history.iter().collect();
    let whole = encode(&all)?;
    if whole.len() <= budget {
        return Ok(whole);
    }
    // Leave out the oldest droppable messages; find how many with a binary search (more
    // left out, fewer tokens).
    let droppable: Vec<usize> = (0..history.len().saturating_sub(1))
        .filter(|&i| history[i].role != Role::System)
        .collect();
    let keep_without = |dropped: usize| -> Vec<&Turn> {
        let gone = &droppable[..dropped];
        history
            .iter()
            .enumerate()
            .filter(|(i, _)| !gone.contains(i))
            .map(|(_, t)| t)
            .collect()
    };
    let (mut lo, mut hi) = (1, droppable.len());
    let mut best = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        let tokens = encode(&keep_without(mid))?;
        if tokens.len() <= budget {
            best = Some(tokens);
            hi = mid - 1;
        } else {
            lo = mid + 1;
        }
    }
    best.ok_or_else(|| {
        format!(
            "the message does not fit the model's context window ({window} tokens, \
             {budget} for the prompt)"
        )
    })
}
