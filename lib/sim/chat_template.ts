/**
 * Renders chat messages into one prompt string the way a ChatML template (Qwen, many others)
 * does: `<|im_start|>{role}\n{content}<|im_end|>\n` per message, then the generation prompt
 * `<|im_start|>assistant\n`. Turn N+1's rendering therefore starts with turn N's rendering plus
 * the reply, which is what lets a real engine's prefix cache serve a conversation.
 *
 * Content is a string, null (an assistant turn with only tool calls) or OpenAI content parts, of
 * which the text parts are joined with nothing between them. Known gaps: tools, images,
 * `reasoning_content` and `name` are not rendered.
 */

/** One OpenAI content part; only `type: "text"` parts contribute. */
export interface ContentPart {
  /** `text`, `image_url`, ... */
  type: string;
  /** The text of a text part. */
  text?: string;
}

/** A chat message as the OpenAI API carries it. */
export interface ChatMessage {
  /** `system`, `user`, `assistant`, `tool`, ... */
  role: string;
  /** A string, text parts, or null/absent for none. */
  content?: string | readonly ContentPart[] | null;
}

/** The text of a message's content: the string itself, or its text parts joined. */
export function contentText(content: ChatMessage["content"]): string {
  if (typeof content === "string") return content;
  if (!content) return "";
  let text = "";
  for (const part of content) {
    if (part.type === "text" && typeof part.text === "string") text += part.text;
  }
  return text;
}

/** The ChatML rendering of `messages`, ending with the assistant generation prompt. */
export function renderChat(messages: readonly ChatMessage[]): string {
  let text = "";
  for (const m of messages) text += `<|im_start|>${m.role}\n${contentText(m.content)}<|im_end|>\n`;
  return text + "<|im_start|>assistant\n";
}
