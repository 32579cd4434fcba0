// Generates corpus.jsonl, the tokenizer parity corpus, deterministically (fixed PRNG seed, no input files).
// Each line is {"name": ..., "text": ...} or, for bytes that are not valid UTF-8, {"name": ..., "b64": ...}.
// Run: node tests/data/tokenizer/make_corpus.mjs > tests/data/tokenizer/corpus.jsonl
function mulberry32(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = mulberry32(20240611);
const pick = (arr) => arr[Math.floor(rand() * arr.length)];

const cases = [];
const text = (name, t) => cases.push({ name, text: t });
const bytes = (name, arr) => cases.push({ name, b64: Buffer.from(arr).toString("base64") });

// Plain English, contractions (the (?i:'s|'t|...) alternatives), clean-up patterns.
text("english", "The quick brown fox jumps over the lazy dog.");
text("contractions", "I'm sure you're right: they'll say it's fine, we've done it, he'd agree, don't worry.");
text("contractions_upper", "I'M SURE YOU'RE RIGHT, IT'S FINE, WE'VE DONE IT, SHE'LL SEE, HE'D GO, CAN'T STOP.");
text("cleanup_patterns", "Hello , world . Are you there ? Yes ! I do n't know ' what ' you 'm 's 've 're saying .");
text("sentences", "Mr. Smith paid $1,234.56 for 3.5 kg of apples (about 7.7 lb) on 2024-03-15 at 10:30am.");
// Scripts.
text("chinese", "我们的目标是构建一个快速、可靠的推理引擎。今天天气很好，我们去公园散步吧！");
text("japanese", "東京は日本の首都です。ひらがなとカタカナ、そして漢字を混ぜて書きます。ｶﾀｶﾅ半角もあります。");
text("korean", "안녕하세요, 세계! 한국어 문장을 토큰화합니다. 띄어쓰기도 중요합니다.");
text("arabic", "مرحبا بالعالم! هذه جملة باللغة العربية مع أرقام ١٢٣٤٥ وعلامات ترقيم؟");
text("hebrew", "שלום עולם! זהו משפט בעברית עם ניקוד: בְּרֵאשִׁית בָּרָא אֱלֹהִים.");
text("devanagari", "नमस्ते दुनिया! यह हिंदी में एक वाक्य है। संख्याएँ: १२३४५६७८९०");
text("thai", "สวัสดีชาวโลก ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ ทำให้การตัดคำยาก");
text("cyrillic", "Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю. Ґанок, їжак, єнот.");
text("greek", "Γειά σου Κόσμε! Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. ΣΊΣΥΦΟΣ ΣΟΦΌΣ.");
text("vietnamese", "Tiếng Việt có rất nhiều dấu: ả, ã, ạ, ắ, ằ, ẳ, ẵ, ặ, ế, ề, ể, ễ, ệ.");
text("turkish_german", "İstanbul'da ılık bir gün. Straße, Fußgänger, GROẞ, Ärger, Öl, Übung.");
text("georgian_armenian", "გამარჯობა მსოფლიო. Բարեւ աշխարհ.");
text("indic_misc", "வணக்கம் உலகம். হ্যালো বিশ্ব। ਸਤਿ ਸ੍ਰੀ ਅਕਾਲ. ሰላም ልዑል.");
text("mixed_scripts", "English中文日本語한국어العربيةעבריתहिन्दीไทยРусскийΕλληνικά mixed together123abc");
// Emoji.
text("emoji", "I love pizza 🍕 and tacos 🌮! 😀😃😄😁 🚀🔥💯");
text("emoji_zwj", "Family: 👨‍👩‍👧‍👦, couple: 👩‍❤️‍👨, rainbow flag: 🏳️‍🌈, technologist: 🧑🏽‍💻");
text("emoji_modifiers", "👍🏻👍🏼👍🏽👍🏾👍🏿 flags 🇺🇸🇯🇵🇩🇪🇫🇷 keycaps 1️⃣2️⃣#️⃣ tags 🏴󠁧󠁢󠁳󠁣󠁴󠁿");
// Code.
text("python", "def fib(n: int) -> int:\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\nprint([fib(i) for i in range(10)])\n");
text("cpp", "#include <vector>\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\tfor (auto& x : v) x *= 2;  // double\n\treturn v.size() > 2 ? 0 : 1;\n}\n");
text("json_html", "{\"key\": [1, 2.5, null, true], \"nested\": {\"a\": \"b\"}}\n<div class=\"x\">&amp; &lt;tag&gt;</div>");
text("regexy", "s/^\\s+|\\s+$//g; a||b && c != d; x->y; i++; --j; 0xFF; 1e-9; @decorator #hash $var %mod ^xor ~not `tick`");
// Whitespace.
text("spaces_runs", "a b  c   d    e     f      g" + " ".repeat(40) + "h");
text("tabs_newlines", "line1\n\nline3\n\n\n\nline7\ttab\t\ttabs\n \n \t \n");
text("crlf", "Windows line\r\nendings\r\n\r\nhere\r\n");
text("leading_trailing_ws", "   leading and trailing   ");
text("only_spaces", "          ");
text("only_newlines", "\n\n\n");
text("unicode_spaces", "nbsp\u00a0thin\u2009em\u2003ideographic\u3000nel\u0085lsep\u2028end");
text("single_space", " ");
text("empty", "");
// Numbers.
text("numbers", "0 1 12 123 1234 12345 123456 1234567 3.14159 -42 +7 1,000,000 1e10 0x1F 2^32");
text("numbers_unicode", "Arabic ٠١٢٣٤٥٦٧٨٩ Bengali ০১২৩ fullwidth １２３ superscript ²³ fractions ½ ¼ roman Ⅻ");
text("digits_long", "31415926535897932384626433832795028841971693993751058209749445923078164062862089986280348253421170679");
// Special-token spellings.
text("special_qwen", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
text("special_llama3", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|end_of_text|>");
text("special_llama2", "<s>[INST] Hello [/INST] Hi there</s><unk>");
text("special_gemma", "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n<eos><pad>");
text("special_deepseek", "<｜begin▁of▁sentence｜>User: hi<｜Assistant｜><think>hmm</think>ok<｜end▁of▁sentence｜>");
text("special_gptoss", "<|start|>system<|message|>You are ChatGPT.<|end|><|start|>user<|message|>hi<|end|><|return|>");
text("special_partial", "<|im_sta <|endoftext <|endoftext|| <<|endoftext|>> <s<s>> </ s> <|eot_id <0x41> ▁▁");
text("special_adjacent", "<|endoftext|><|endoftext|>x<|endoftext|> <|endoftext|>\n<|endoftext|>");
text("tool_tags", "<tool_call>\n{\"name\": \"f\"}\n</tool_call><think>\nreasoning\n</think>");
// NUL and control characters.
text("nul", "a\u0000b\u0000\u0000c");
text("controls", "bell\u0007 esc\u001b[31m red\u001b[0m del\u007f c1\u0080\u009f");
// Combining marks, NFC vs NFD, compatibility characters.
text("nfc", "caf\u00e9 na\u00efve \u00c5ngstr\u00f6m \uac00");
text("nfd", "cafe\u0301 nai\u0308ve A\u030angstro\u0308m \u1100\u1161");
text("compat", "ﬁﬂ ligatures, ① circled, ｆｕｌｌｗｉｄｔｈ, ㎏ ℃ ™ Ω K Å");
text("zalgo", "Z\u0337\u0322\u031ba\u0336l\u0338g\u0335o\u0334 t\u0336\u0308\u0301e\u0300\u0302x\u0303t");
text("replacement_char", "already \ufffd replaced \ufffd\ufffd");
text("bom_inside", "a\ufeffb zero\u200bwidth\u200cjoiner\u200d");
// Invalid UTF-8 (replaced by U+FFFD before tokenizing).
bytes("invalid_ff", [0xff]);
bytes("invalid_truncated", [0x61, 0x62, 0x63, 0xc3]);
bytes("invalid_truncated3", [0xe4, 0xb8, 0x20, 0xe4, 0xb8, 0xad]);
bytes("invalid_surrogate", [0x78, 0xed, 0xa0, 0x80, 0x79]);
bytes("invalid_too_big", [0xf4, 0x90, 0x80, 0x80, 0x21]);
bytes("invalid_overlong", [0xc0, 0xaf, 0xe0, 0x80, 0xaf, 0x2f]);
bytes("invalid_continuations", [0x80, 0x80, 0xbf, 0x41]);
bytes("invalid_mixed", [...Buffer.from("héllo "), 0xfe, ...Buffer.from(" wörld "), 0xf0, 0x9f, 0x98, ...Buffer.from(" end")]);

// Long lines.
const paragraph = cases.filter((c) => c.text && c.text.length > 30).map((c) => c.text.replace(/\n/g, " ")).join(" ");
text("long_mixed_line", paragraph.repeat(3));
text("long_word", "a".repeat(3000) + "b".repeat(1000));
text("long_spaces", " ".repeat(5000) + "x" + " ".repeat(3000));
text("long_newlines", "\n".repeat(2000) + "y");
text("long_digits", "1234567890".repeat(300));
text("long_cjk", "的一是不了人我在有他这为之大来以个中上们".repeat(200));
text("long_punct", "!?.,;:-".repeat(500));

// Random strings from common blocks (all assigned since Unicode 6, so every engine's tables agree).
const ranges = [[0x20, 0x7e], [0xa0, 0x17f], [0x370, 0x3ff], [0x400, 0x4ff], [0x590, 0x5ea], [0x620, 0x64a],
  [0x905, 0x939], [0xe01, 0xe3a], [0x3041, 0x3096], [0x30a1, 0x30fa], [0x4e00, 0x9fa5], [0xac00, 0xd7a3],
  [0x2000, 0x206f], [0x1f600, 0x1f64f], [0x1f300, 0x1f5ff], [0x300, 0x36f], [0x9, 0xd]];
for (let k = 0; k < 24; ++k) {
  const n = 1 + Math.floor(rand() * (k < 20 ? 80 : 4000));
  let s = "";
  for (let i = 0; i < n; ++i) {
    const [lo, hi] = pick(ranges);
    s += String.fromCodePoint(lo + Math.floor(rand() * (hi - lo + 1)));
  }
  text(`random_${k}`, s);
}

for (const c of cases) process.stdout.write(JSON.stringify(c) + "\n");
