#!/usr/bin/env python3
"""Trains ridgeline-tiny, the embedded default model: a byte-level BPE tokenizer and a ~7.9 M parameter Qwen3
model on the King James Bible (public domain; Debian package bible-kjv). Runs on the GPU machine.

Stages (scripts/device/train_tiny.sh runs them in order):
  tokenizer  trains the BPE tokenizer on the training chapters -> WORK/tokenizer/
  train      trains one variant (epochs, residual dropout) -> WORK/run_<tag>/{model/, stats.json}; several
             variants run at once on the one GPU, since a model this small leaves it mostly idle
  finalize   picks the variant with the lowest held-out loss, copies its HF folder to OUT, reloads it with
             transformers (float32, CPU) for the golden greedy continuations, measures held-out perplexity of the
             shipped bf16 weights, prints samples and writes the model card README.md.
  golden     rewrites only the golden JSON from an existing HF folder (--model).

Data: `bible -f "Gen1:1-Rev22:21"` output, one verse a line as "<Book><chapter>:<verse> <text>". References are
stripped; a chapter is one document (one verse a line), documents are separated by <|endoftext|>. Every 50th
chapter (index % 50 == 25, 24 of 1189) is held out for perplexity. A few ChatML exchanges built from training
verses (user: a verse, assistant: the next verse) teach the chat template and <|im_end|>.
"""
import argparse
import glob
import json
import math
import os
import random
import re
import shutil
import sys
import time

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
EOT_ID, IM_START_ID, IM_END_ID = 0, 1, 2
VOCAB_SIZE = 6144
CONTEXT = 1024
HELDOUT_EVERY, HELDOUT_PHASE = 50, 25
CHAT_PER_CHAPTER = 2
# Qwen2/Qwen3's pre-tokenizer split, so the tiny model exercises the same tokenizer path as the real ones.
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
SYSTEM_PROMPTS = ["You are ridgeline-tiny, a small model that writes in the style of the King James Bible.",
                  "Continue the verse."]
MODEL_SHAPE = dict(hidden_size=256, intermediate_size=768, num_hidden_layers=8, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=64)
ROPE_THETA = 10000.0
# Golden prompts: the first GOLDEN_COUNT candidates, in order, whose greedy steps all have a top-1/top-2 logit
# margin >= GOLDEN_MIN_MARGIN, so that a float32 engine summing in another order must pick the same tokens.
GOLDEN_CANDIDATES = ["In the beginning", "And the LORD said unto Moses,", "Blessed are the",
                     "The LORD is my shepherd;", "And Jesus said unto them,", "And it came to pass", "And God said,",
                     "For God so loved the world,", "Hear, O Israel:", "And he said unto them,",
                     "O give thanks unto the LORD;", "The word of the LORD came unto me, saying,", "Behold, I",
                     "And the king said", "Praise ye the LORD.", "My son, hear"]
GOLDEN_COUNT = 3
GOLDEN_MIN_MARGIN = 0.1
GOLDEN_NEW_TOKENS = 32
SAMPLE_PROMPTS = ["In the beginning", "And the LORD said unto Moses,", "Blessed are the", "The LORD is my shepherd;",
                  "And Jesus said unto them,"]
MODEL_FILES = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
               "tokenizer_config.json"]
# Qwen3 takes no token_type_ids; without this the tokenizer returns them and generate() rejects them.
MODEL_INPUT_NAMES = ["input_ids", "attention_mask"]
VERSE_RE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")


def log(tag, msg):
    print(f"[{tag}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------- data


def read_chapters(path):
    """Returns [(book, chapter, [verse texts])] in canonical order; raises on a line of unknown form."""
    chapters = []
    with open(path, encoding="utf-8") as f:
        for num, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            m = VERSE_RE.match(line)
            if not m:
                raise ValueError(f"{path}:{num}: not a '<Book><chapter>:<verse> text' line: {line[:60]!r}")
            book, chapter, text = m.group(1), int(m.group(2)), m.group(4).strip()
            if not chapters or chapters[-1][0] != book or chapters[-1][1] != chapter:
                chapters.append((book, chapter, []))
            chapters[-1][2].append(text)
    if not chapters:
        raise ValueError(f"{path}: no verses")
    return chapters


def split_chapters(chapters):
    train = [c for i, c in enumerate(chapters) if i % HELDOUT_EVERY != HELDOUT_PHASE]
    heldout = [c for i, c in enumerate(chapters) if i % HELDOUT_EVERY == HELDOUT_PHASE]
    return train, heldout


def chapter_text(chapter):
    return "\n".join(chapter[2]) + "\n"


def chat_text(system, user, assistant):
    turns = ([("system", system)] if system else []) + [("user", user), ("assistant", assistant)]
    return "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in turns)


def training_documents(train_chapters, seed):
    """Chapter documents plus CHAT_PER_CHAPTER ChatML exchanges a chapter, shuffled with a fixed seed."""
    rng = random.Random(seed)
    docs = [chapter_text(c) for c in train_chapters]
    for _, _, verses in train_chapters:
        for _ in range(CHAT_PER_CHAPTER if len(verses) >= 2 else 0):
            j = rng.randrange(len(verses) - 1)
            system = rng.choice(SYSTEM_PROMPTS) if rng.random() < 0.3 else None
            user = verses[j] if rng.random() < 0.7 else "Continue: " + verses[j]
            docs.append(chat_text(system, user, verses[j + 1]))
    rng.shuffle(docs)
    return docs


def encode_stream(tok, docs):
    """Concatenates the documents' ids, each followed by <|endoftext|>."""
    ids = []
    for enc in tok.encode_batch(docs, add_special_tokens=False):
        ids.extend(enc.ids)
        ids.append(EOT_ID)
    return ids


# ---------------------------------------------------------------------------------------------- tokenizer


def build_tokenizer(train_chapters):
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    texts = [chapter_text(c) for c in train_chapters]
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    if tok.get_vocab_size() > VOCAB_SIZE:
        raise RuntimeError(f"tokenizer has {tok.get_vocab_size()} tokens, the model {VOCAB_SIZE}")
    # Decoder, post-processor and the ByteLevel step written exactly as in Qwen3's tokenizer.json.
    j = json.loads(tok.to_str())
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    j["pre_tokenizer"]["pretokenizers"][1] = dict(byte_level)
    j["decoder"] = dict(byte_level)
    j["post_processor"] = dict(byte_level)
    tok = Tokenizer.from_str(json.dumps(j))
    for i, t in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(t) != i:
            raise RuntimeError(f"special token {t} got id {tok.token_to_id(t)}, expected {i}")
    return tok


def save_hf_tokenizer(tok, out_dir):
    """Saves tokenizer.json + tokenizer_config.json (chat template inline) through PreTrainedTokenizerFast."""
    from transformers import PreTrainedTokenizerFast
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|endoftext|>",
                                 pad_token="<|endoftext|>", model_max_length=CONTEXT,
                                 clean_up_tokenization_spaces=False, model_input_names=MODEL_INPUT_NAMES)
    hf.chat_template = CHAT_TEMPLATE
    tmp = out_dir + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        hf.save_pretrained(tmp, save_jinja_files=False)
    except Exception:  # transformers without save_jinja_files; the template is folded in below either way
        shutil.rmtree(tmp, ignore_errors=True)
        hf.save_pretrained(tmp)
    with open(os.path.join(tmp, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    jinja = os.path.join(tmp, "chat_template.jinja")
    if os.path.exists(jinja):
        with open(jinja, encoding="utf-8") as f:
            cfg["chat_template"] = f.read()
    cfg.setdefault("chat_template", CHAT_TEMPLATE)
    # The standard class name, so transformers 4.x and 5.x both load the folder.
    cfg.update(tokenizer_class="PreTrainedTokenizerFast", bos_token=None, eos_token="<|endoftext|>",
               pad_token="<|endoftext|>", model_max_length=CONTEXT, clean_up_tokenization_spaces=False,
               model_input_names=MODEL_INPUT_NAMES)
    os.makedirs(out_dir, exist_ok=True)
    shutil.copy(os.path.join(tmp, "tokenizer.json"), os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
        f.write("\n")
    shutil.rmtree(tmp, ignore_errors=True)


def stage_tokenizer(args):
    t0 = time.time()
    train, heldout = split_chapters(read_chapters(args.data))
    tok = build_tokenizer(train)
    out = os.path.join(args.work, "tokenizer")
    save_hf_tokenizer(tok, out)
    n_train = sum(len(e.ids) for e in tok.encode_batch([chapter_text(c) for c in train], add_special_tokens=False))
    log("tok", f"vocab {tok.get_vocab_size()} chapters train {len(train)} heldout {len(heldout)} "
               f"train-text tokens {n_train} ({time.time() - t0:.1f} s)")
    sample = "In the beginning God created the heaven and the earth."
    log("tok", f"sample {tok.encode(sample).tokens}")


# ---------------------------------------------------------------------------------------------- model


def make_config(shape=None):
    """shape: MODEL_SHAPE's keys (default: MODEL_SHAPE, the shipped default model)."""
    from transformers import Qwen3Config
    return Qwen3Config(vocab_size=VOCAB_SIZE, max_position_embeddings=CONTEXT, rms_norm_eps=1e-6,
                       tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA},
                       use_sliding_window=False, attention_bias=False, attention_dropout=0.0,
                       bos_token_id=None, eos_token_id=EOT_ID, pad_token_id=EOT_ID, use_cache=True,
                       **(shape or MODEL_SHAPE))


def shape_from_args(args):
    """MODEL_SHAPE with --shape overrides ("hidden_size=1024,num_hidden_layers=12,..."), e.g. for the larger
    targets of speculative-decoding benchmarks (scripts/device/spec_bench.sh)."""
    shape = dict(MODEL_SHAPE)
    for item in filter(None, (args.shape or "").split(",")):
        key, _, value = item.partition("=")
        if key not in shape:
            raise ValueError(f"--shape: unknown key {key!r} (known: {', '.join(shape)})")
        shape[key] = int(value)
    return shape


def add_residual_dropout(model, p):
    """Dropout on each attention and MLP output before the residual add, in training mode only. Hooks are not
    part of the saved model: inference is plain Qwen3."""
    import torch.nn.functional as F

    def hook(module, inputs, output):
        if not module.training:
            return output
        if isinstance(output, tuple):
            return (F.dropout(output[0], p, True),) + tuple(output[1:])
        return F.dropout(output, p, True)

    if p > 0:
        for layer in model.model.layers:
            layer.self_attn.register_forward_hook(hook)
            layer.mlp.register_forward_hook(hook)


def windows(ids, offset):
    """ids: 1-D LongTensor -> (x, y): [n, CONTEXT] inputs and next-token targets starting at offset."""
    n = (ids.numel() - 1 - offset) // CONTEXT
    x = ids[offset:offset + n * CONTEXT].view(n, CONTEXT)
    y = ids[offset + 1:offset + 1 + n * CONTEXT].view(n, CONTEXT)
    return x, y


def heldout_windows(ids):
    """Every token but the first is predicted once: full windows plus a shorter tail window."""
    x, y = windows(ids, 0)
    pieces = [(x, y)]
    done = x.numel()
    if ids.numel() - 1 > done:
        pieces.append((ids[done:-1].view(1, -1), ids[done + 1:].view(1, -1)))
    return pieces


def eval_loss(model, pieces, batch, autocast):
    """Mean next-token loss (nats) and the number of predicted tokens."""
    import torch
    import torch.nn.functional as F
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for x, y in pieces:
            for i in range(0, x.shape[0], batch):
                xb, yb = x[i:i + batch], y[i:i + batch]
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                    logits = model(input_ids=xb, use_cache=False).logits
                total += F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), yb.reshape(-1),
                                         reduction="sum").item()
                count += yb.numel()
    model.train(was_training)
    return total / count, count


def lr_at(progress, step, args):
    warm = min(1.0, (step + 1) / args.warmup)
    cos = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return warm * (args.min_lr + (args.lr - args.min_lr) * cos)


def stage_train(args):
    import torch
    import torch.nn.functional as F
    from tokenizers import Tokenizer
    from transformers import GenerationConfig, Qwen3ForCausalLM
    tag = args.tag
    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = torch.device("cuda")
    tok = Tokenizer.from_file(os.path.join(args.work, "tokenizer", "tokenizer.json"))
    train_ch, held_ch = split_chapters(read_chapters(args.data))
    train_ids = torch.tensor(encode_stream(tok, training_documents(train_ch, args.seed)), dtype=torch.long,
                             device=dev)
    held_ids = torch.tensor(encode_stream(tok, [chapter_text(c) for c in held_ch]), dtype=torch.long, device=dev)
    held = heldout_windows(held_ids)

    model = Qwen3ForCausalLM(make_config(shape_from_args(args))).to(dev)
    model.config.use_cache = False
    add_residual_dropout(model, args.dropout)
    num_params = sum(p.numel() for p in model.parameters())
    tied = model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95),
                            eps=1e-8, fused=True)
    steps_per_epoch = (train_ids.numel() - CONTEXT) // CONTEXT // args.batch
    total_steps = steps_per_epoch * args.epochs
    log(tag, f"params {num_params} tied {tied} train tokens {train_ids.numel()} heldout tokens "
             f"{held_ids.numel()} steps/epoch {steps_per_epoch} total {total_steps} dropout {args.dropout}")

    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    step, t0, curve, stopped_by, epoch_losses, lr = 0, time.time(), [], "steps", [], 0.0
    model.train()
    for epoch in range(args.epochs):
        x, y = windows(train_ids, int(torch.randint(CONTEXT, (1,), generator=gen)))
        perm = torch.randperm(x.shape[0], generator=gen).to(dev)
        losses = []
        for b in range(steps_per_epoch):
            progress = max(step / total_steps, (time.time() - t0) / args.time_limit)
            if progress >= 1.0:
                stopped_by = "time"
                break
            lr = lr_at(progress, step, args)
            for g in opt.param_groups:
                g["lr"] = lr
            idx = perm[b * args.batch:(b + 1) * args.batch]
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(input_ids=x[idx], use_cache=False).logits
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y[idx].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.detach())
            if step % 250 == 0:
                log(tag, f"step {step} loss {loss.item():.4f} lr {lr:.2e} {time.time() - t0:.1f} s")
            step += 1
        if losses:
            epoch_losses.append(torch.stack(losses).mean().item())
        val, _ = eval_loss(model, held, args.batch, True)
        curve.append([epoch + 1, round(epoch_losses[-1], 4) if epoch_losses else None, round(val, 4)])
        log(tag, f"epoch {epoch + 1} step {step} train {curve[-1][1]} heldout {val:.4f} "
                 f"ppl {math.exp(val):.2f} lr {lr:.2e} {time.time() - t0:.0f} s")
        if stopped_by == "time":
            break
    train_time = time.time() - t0
    train_sample = [(x[:16], y[:16])]
    train_eval, _ = eval_loss(model, train_sample, args.batch, True)
    val, _ = eval_loss(model, held, args.batch, True)

    run = os.path.join(args.work, f"run_{tag}")
    model_dir = os.path.join(run, "model")
    model.to(torch.bfloat16)
    model.config.use_cache = True
    model.generation_config = GenerationConfig(
        bos_token_id=None, eos_token_id=[EOT_ID, IM_END_ID], pad_token_id=EOT_ID, do_sample=True,
        temperature=0.8, top_p=0.95, top_k=50, max_new_tokens=256)
    model.save_pretrained(model_dir)
    fix_config_json(os.path.join(model_dir, "config.json"))
    stats = dict(tag=tag, epochs=args.epochs, epochs_run=len(curve), dropout=args.dropout, lr=args.lr,
                 min_lr=args.min_lr, warmup=args.warmup, weight_decay=args.weight_decay, batch=args.batch,
                 context=CONTEXT, steps=step, planned_steps=total_steps, tokens_seen=step * args.batch * CONTEXT,
                 train_tokens=train_ids.numel(), heldout_tokens=held_ids.numel(), train_time_s=round(train_time, 1),
                 stopped_by=stopped_by, num_params=num_params, last_epoch_train_loss=epoch_losses[-1],
                 train_loss_eval_mode=train_eval, heldout_loss=val, curve=curve,
                 gpu=torch.cuda.get_device_name(0), torch_version=torch.__version__)
    with open(os.path.join(run, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    log(tag, "stats " + json.dumps(stats))


def fix_config_json(path):
    """Makes the stored weights' dtype explicit (transformers 5 key)."""
    with open(path) as f:
        cfg = json.load(f)
    cfg["dtype"] = "bfloat16"
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


# ---------------------------------------------------------------------------------------------- finalize


def greedy_golden(model, tok, prompt, add_special_tokens):
    """Greedy decoding by full recompute each step (no KV cache, no EOS stop), f32 on CPU."""
    import torch
    prompt_ids = tok(prompt, add_special_tokens=add_special_tokens)["input_ids"]
    ids, greedy, margins, last_logits = list(prompt_ids), [], [], None
    with torch.no_grad():
        for i in range(GOLDEN_NEW_TOKENS):
            logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1].float()
            if i == 0:
                last_logits = [round(v, 5) for v in logits.tolist()]
            top = torch.topk(logits, 2)
            greedy.append(int(top.indices[0]))
            margins.append(round(float(top.values[0] - top.values[1]), 5))
            ids.append(greedy[-1])
    return dict(text=prompt, prompt_ids=prompt_ids, greedy_ids=greedy, margins=margins,
                min_margin=min(margins), greedy_text=tok.decode(greedy),
                eos_in_greedy=any(t in (EOT_ID, IM_END_ID) for t in greedy), last_prompt_logits=last_logits)


def generate_check(model, prompt_ids, greedy_ids):
    """Cross-checks the recompute loop against model.generate (KV cache); compared up to a first EOS."""
    import torch
    try:
        out = model.generate(input_ids=torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids),
                             dtype=torch.long), do_sample=False, max_new_tokens=GOLDEN_NEW_TOKENS,
                             pad_token_id=EOT_ID)
        got = out[0, len(prompt_ids):].tolist()
        n = min(len(got), len(greedy_ids))
        return "agrees" if got[:n] == greedy_ids[:n] else f"differs: generate gave {got}"
    except Exception as e:  # the check is informative only; the golden comes from the loop above
        return f"error: {e!r}"


def sample_texts(model, tok, prompts, seed, max_new_tokens=60):
    import torch
    torch.manual_seed(seed)
    out = []
    for p in prompts:
        try:
            enc = tok(p, return_tensors="pt")
            g = model.generate(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], do_sample=True,
                               temperature=0.8, top_p=0.95, top_k=50,
                               max_new_tokens=max_new_tokens, pad_token_id=EOT_ID)
            out.append(tok.decode(g[0], skip_special_tokens=False))
        except Exception as e:
            out.append(f"(sampling failed: {e!r})")
    return out


def chat_sample(model, tok, seed):
    import torch
    try:
        messages = [{"role": "user", "content": "In the beginning God created the heaven and the earth."}]
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        enc = tok(text, return_tensors="pt", add_special_tokens=False)
        torch.manual_seed(seed)
        g = model.generate(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], do_sample=True,
                           temperature=0.8, top_p=0.95, top_k=50, max_new_tokens=60,
                           pad_token_id=EOT_ID)
        return text, tok.decode(g[0, enc["input_ids"].shape[1]:], skip_special_tokens=False)
    except Exception as e:
        return "(chat template failed)", repr(e)


def heldout_metrics(model, tok_path, data, device):
    """Held-out loss of the shipped weights (bf16 stored, f32 compute), perplexity and bits per byte."""
    import torch
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_path)
    _, held_ch = split_chapters(read_chapters(data))
    ids = torch.tensor(encode_stream(tok, [chapter_text(c) for c in held_ch]), dtype=torch.long, device=device)
    pieces = heldout_windows(ids)
    model.to(device)
    loss, count = eval_loss(model, pieces, 8, False)
    model.to("cpu")
    nbytes = sum(len(tok.id_to_token(t)) for t in ids[1:].tolist() if t >= len(SPECIAL_TOKENS))
    return dict(loss=loss, ppl=math.exp(loss), tokens=count, bytes=nbytes,
                bits_per_byte=loss * count / math.log(2) / nbytes, chapters=len(held_ch))


def compact_json(obj):
    """Indented JSON with each list of numbers on one line (the logits lists stay readable in a diff)."""
    text = json.dumps(obj, indent=1)
    return re.sub(r"\[\s*(-?[0-9][-0-9.eE+,\s]*?)\s*\]",
                  lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",")) + "]", text)


def write_golden(model, tok, path):
    """Greedy continuations of GOLDEN_COUNT well-separated prompts (see GOLDEN_CANDIDATES) -> JSON at path."""
    import tokenizers
    import torch
    import transformers
    golden = dict(model="ridgeline-tiny", transformers_version=transformers.__version__,
                  torch_version=torch.__version__, tokenizers_version=tokenizers.__version__, dtype="float32",
                  weights_dtype="bfloat16", device="cpu", add_special_tokens=True,
                  max_new_tokens=GOLDEN_NEW_TOKENS, eos_token_ids=[EOT_ID, IM_END_ID],
                  min_margin_required=GOLDEN_MIN_MARGIN,
                  note="greedy by full recompute each step with transformers (AutoModelForCausalLM, float32, CPU); "
                       "EOS does not stop it; margins are top1 - top2 logits of each step; last_prompt_logits are "
                       "the logits at the last prompt position (rounded to 1e-5); prompts are the first candidates "
                       "whose every step has a margin >= min_margin_required, skipped ones are listed",
                  prompts=[], skipped=[])
    tried = []
    for p in GOLDEN_CANDIDATES:
        g = greedy_golden(model, tok, p, True)
        tried.append(g)
        log("golden", f"{p!r}: {g['prompt_ids']} -> {g['greedy_ids']} min margin {g['min_margin']}\n    "
                      f"{p + g['greedy_text']!r}")
        if g["min_margin"] >= GOLDEN_MIN_MARGIN:
            golden["prompts"].append(g)
        else:
            golden["skipped"].append(dict(text=p, min_margin=g["min_margin"]))
        if len(golden["prompts"]) == GOLDEN_COUNT:
            break
    if len(golden["prompts"]) < GOLDEN_COUNT:
        log("golden", f"WARNING: fewer than {GOLDEN_COUNT} prompts reach margin {GOLDEN_MIN_MARGIN}; "
                      "taking the best separated ones")
        chosen = sorted(tried, key=lambda g: -g["min_margin"])[:GOLDEN_COUNT]
        golden["prompts"] = [g for g in tried if g in chosen]
        golden["skipped"] = [dict(text=g["text"], min_margin=g["min_margin"]) for g in tried if g not in chosen]
    for g in golden["prompts"]:
        g["generate_check"] = generate_check(model, g["prompt_ids"], g["greedy_ids"])
        log("golden", f"chosen {g['text']!r}: generate() {g['generate_check'][:80]}")
    with open(path, "w") as f:
        f.write(compact_json(golden) + "\n")
    return golden


def load_for_golden(model_dir):
    """transformers' view of the folder: AutoTokenizer and AutoModelForCausalLM in float32 on the CPU."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.set_num_threads(os.cpu_count() or 4)
    try:
        tok = AutoTokenizer.from_pretrained(model_dir)
    except Exception as e:  # reported loudly; the golden still needs a tokenizer
        log("final", f"ERROR: AutoTokenizer cannot load the folder: {e!r}; using PreTrainedTokenizerFast")
        tok = transformers.PreTrainedTokenizerFast.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    return tok, model


def stage_golden(args):
    if not args.model:
        raise ValueError("golden needs --model (an HF folder) and --golden")
    tok, model = load_for_golden(args.model)
    write_golden(model, tok, args.golden)


def stage_finalize(args):
    import tokenizers
    import torch
    runs = []
    for path in sorted(glob.glob(os.path.join(args.work, "run_*", "stats.json"))):
        with open(path) as f:
            runs.append(json.load(f))
    if not runs:
        raise RuntimeError("no finished training run under " + args.work)
    best = min(runs, key=lambda r: r["heldout_loss"])
    for r in runs:
        log("final", f"variant {r['tag']}: epochs {r['epochs_run']}/{r['epochs']} dropout {r['dropout']} "
                     f"heldout {r['heldout_loss']:.4f}{'  <- chosen' if r is best else ''}")
    os.makedirs(args.out, exist_ok=True)
    src_model = os.path.join(args.work, f"run_{best['tag']}", "model")
    for name in MODEL_FILES:
        src_dir = os.path.join(args.work, "tokenizer") if name.startswith("tokenizer") else src_model
        shutil.copy(os.path.join(src_dir, name), os.path.join(args.out, name))

    tok, model = load_for_golden(args.out)
    raw = tokenizers.Tokenizer.from_file(os.path.join(args.out, "tokenizer.json"))
    probe = "And God said, Let there be light: and there was light.\n<|im_start|>user\nHi<|im_end|>\n"
    parity = tok(probe, add_special_tokens=True)["input_ids"] == raw.encode(probe).ids
    log("final", f"AutoTokenizer {type(tok).__name__} parity with tokenizers.Tokenizer: {parity}; "
                 f"chat template present: {bool(tok.chat_template)}")

    device = "cuda" if torch.cuda.is_available() else "cpu"
    metrics = heldout_metrics(model, os.path.join(args.out, "tokenizer.json"), args.data, device)
    log("final", f"shipped bf16 weights, f32 compute: heldout loss {metrics['loss']:.4f} ppl {metrics['ppl']:.2f} "
                 f"bits/byte {metrics['bits_per_byte']:.3f}")

    golden = write_golden(model, tok, args.golden)
    samples = sample_texts(model, tok, SAMPLE_PROMPTS, args.seed)
    for s in samples:
        log("final", f"sample: {s!r}")
    chat_prompt, chat_reply = chat_sample(model, tok, args.seed)
    log("final", f"chat: {chat_prompt!r} -> {chat_reply!r}")
    write_card(args.out, best, runs, metrics, golden, samples, (chat_prompt, chat_reply))
    sizes = {n: os.path.getsize(os.path.join(args.out, n)) for n in os.listdir(args.out)}
    log("final", f"files {sizes} total {sum(sizes.values())} bytes")


def write_card(out, best, runs, metrics, golden, samples, chat):
    g0 = golden["prompts"][0]
    variants = "\n".join(
        f"| {r['tag']} | {r['epochs_run']}/{r['epochs']} | {r['dropout']} | {r['steps']} | {r['heldout_loss']:.4f} |"
        for r in runs)
    curve = "\n".join(f"| {e} | {t} | {v} |" for e, t, v in best["curve"])
    card = f"""# ridgeline-tiny

The embedded default model of ridgeline: a {best['num_params'] / 1e6:.2f} M parameter Qwen3-architecture
language model trained from scratch on the King James Bible. It writes verse-like text in the style of the
KJV and nothing else: it is for tests, demos and quick runs, not for answering questions.

## Data and licence
- Text: the King James Version as printed by `bible -f "Gen1:1-Rev22:21"` from the Debian package
  `bible-kjv` (the package's software is GPL-licensed; the KJV text itself is in the public domain).
- Verse references are stripped; each chapter is one document, one verse a line, documents separated by
  `<|endoftext|>`. {CHAT_PER_CHAPTER} short ChatML exchanges a chapter (user: a verse, assistant: the next verse)
  teach the chat format.
- Held out for perplexity: every {HELDOUT_EVERY}th chapter (chapter index % {HELDOUT_EVERY} == {HELDOUT_PHASE}),
  {metrics['chapters']} of 1189 chapters, {best['heldout_tokens']} tokens (about 2 %). Training stream:
  {best['train_tokens']} tokens.
- The tokenizer and weights are derived from that public-domain text alone.

## Tokenizer
Byte-level BPE trained with Hugging Face `tokenizers` on the training chapters: vocabulary {VOCAB_SIZE}
(256 byte symbols + merges), NFC normalizer, Qwen2/Qwen3's Split regex then ByteLevel (no prefix space),
ByteLevel decoder. Special tokens: `<|endoftext|>` = {EOT_ID} (eos, pad), `<|im_start|>` = {IM_START_ID},
`<|im_end|>` = {IM_END_ID}; no BOS is added. `tokenizer_config.json` holds a ChatML chat template
(system/user/assistant turns, `add_generation_prompt`).

## Architecture
`Qwen3ForCausalLM`: hidden {MODEL_SHAPE['hidden_size']}, {MODEL_SHAPE['num_hidden_layers']} layers,
{MODEL_SHAPE['num_attention_heads']} attention heads and {MODEL_SHAPE['num_key_value_heads']} KV heads of
head_dim {MODEL_SHAPE['head_dim']} (q/k RMSNorm), SwiGLU MLP {MODEL_SHAPE['intermediate_size']}, RMSNorm eps
1e-6, RoPE theta {ROPE_THETA:g}, context {CONTEXT}, tied embeddings. {best['num_params']} parameters,
stored in bfloat16 (`model.safetensors`).

## Training
- AdamW (betas 0.9/0.95, weight decay {best['weight_decay']} on matrices), peak lr {best['lr']:g} with
  {best['warmup']} warmup steps and cosine decay to {best['min_lr']:g}, batch {best['batch']} x {best['context']}
  tokens, bf16 autocast, gradient clipping 1.0, residual dropout {best['dropout']} (training only; the saved
  model is plain Qwen3).
- {best['steps']} steps, {best['epochs_run']} epochs, {best['tokens_seen']:,} tokens seen, {best['train_time_s']} s on
  one {best['gpu']} (torch {best['torch_version']}); stopped by {best['stopped_by']}.
- Several variants trained at once on the one GPU; the one with the lowest held-out loss was kept:

| variant | epochs run/planned | dropout | steps | held-out loss |
| --- | --- | --- | --- | --- |
{variants}

Chosen variant `{best['tag']}`, per epoch (training loss with dropout on; held-out loss):

| epoch | train loss | held-out loss |
| --- | --- | --- |
{curve}

## Results
- Final training loss: {best['last_epoch_train_loss']:.4f} (last epoch mean, dropout on);
  {best['train_loss_eval_mode']:.4f} on 16 training windows in eval mode.
- Held-out ({metrics['tokens']} tokens), shipped bf16 weights computed in float32: loss {metrics['loss']:.4f},
  perplexity {metrics['ppl']:.2f}, {metrics['bits_per_byte']:.3f} bits per byte.

## Samples
Greedy (32 tokens, transformers {golden['transformers_version']}, float32):

```
{g0['text'] + g0['greedy_text']}
```

Sampled (temperature 0.8, top-p 0.95, top-k 50):

```
{samples[3] if len(samples) > 3 else samples[-1]}
```

Chat (template applied, sampled reply):

```
{chat[0]}{chat[1]}
```

## Golden test data
`tests/data/tiny_golden.json`: for {len(golden['prompts'])} prompts, the prompt ids, transformers' greedy
continuation of {golden['max_new_tokens']} tokens (float32, EOS not stopping), the top-1/top-2 logit margin of
each step and the logits of the last prompt position. The prompts are the first candidates whose every greedy
step has a margin of at least {golden['min_margin_required']} (`golden` stage of `tools/train_tiny.py`), so an
engine that sums in another order must still pick the same tokens.

## Regenerate
On the GPU machine: `scripts/device/train_tiny.sh` (data: `bible -f "Gen1:1-Rev22:21" > .data/kjv.txt`, carried
along), then copy `$OUT/ridgeline-tiny/*` here and `$OUT/tiny_golden.json` to `tests/data/`.
Source: `tools/train_tiny.py`.
"""
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write(card)


# ---------------------------------------------------------------------------------------------- main


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage", choices=["tokenizer", "train", "finalize", "golden"])
    ap.add_argument("--data", help="`bible -f` output")
    ap.add_argument("--work", default="/tmp/ridgeline-tiny-work", help="scratch folder shared by the stages")
    ap.add_argument("--model", help="golden: the HF model folder to read")
    ap.add_argument("--out", help="finalize: the HF model folder to write")
    ap.add_argument("--golden", help="finalize: the golden JSON to write")
    ap.add_argument("--tag", default="a")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--min-lr", type=float, default=1.5e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--time-limit", type=float, default=120.0, help="seconds of training; the cosine ends by then")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--shape", help="train: model shape overrides, e.g. hidden_size=1024,num_hidden_layers=12")
    args = ap.parse_args(argv)
    if args.stage != "golden" and not args.data:
        ap.error(args.stage + " needs --data")
    if args.stage == "finalize" and not (args.out and args.golden):
        ap.error("finalize needs --out and --golden")
    if args.stage == "golden" and not (args.model and args.golden):
        ap.error("golden needs --model and --golden")
    os.makedirs(args.work, exist_ok=True)
    stages = {"tokenizer": stage_tokenizer, "train": stage_train, "finalize": stage_finalize, "golden": stage_golden}
    stages[args.stage](args)


if __name__ == "__main__":
    main(sys.argv[1:])
