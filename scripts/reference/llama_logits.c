// llama_logits.c - the reference for gglua's llm library: llama.cpp itself
// (a prebuilt libllama, as npm's @node-llama-cpp/linux-x64 ships it) loads
// a GGUF model, optionally applies a LoRA adapter, runs one batch of
// tokens and prints every position's logits, one line each.
//
//   llama_logits BACKENDS_DIR MODEL.gguf [--lora ADAPTER.gguf] [--generate N] ID ...
//   llama_logits BACKENDS_DIR MODEL.gguf --tokenize | --tokenize-special | --detokenize
//   llama_logits BACKENDS_DIR --quantize IN.gguf OUT.gguf q8_0|q4_0|q4_k_m
//
// The KV cache is f32 and flash attention off, so that the logits are
// llama.cpp's exact f32 ones. --generate N instead prints the ids of up to
// N greedy tokens after the prompt (one decode each, the first of equal
// logits, stopping after an end-of-generation token, which is not printed).
// --tokenize reads texts from stdin, one a
// line in hex, and prints the ids llama_tokenize gives each (no BOS added,
// special tokens not parsed, as llama.cpp's tokenizer tests call it;
// --tokenize-special adds BOS and parses them, as its tools read a prompt);
// --detokenize reads lines of ids and prints llama_detokenize's text of
// each in hex (special tokens neither removed nor shown).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "llama.h"

static bool no_progress(float progress, void * data) {
    (void) progress;
    (void) data;
    return true;
}

static void quiet(enum ggml_log_level level, const char * text, void * data) {
    (void) data;
    if (level >= GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

// tokenize_lines answers --tokenize: a text in hex a line, ids out.
static int tokenize_lines(const struct llama_vocab * vocab, bool special) {
    static char line[1 << 20];
    static char text[1 << 19];
    static llama_token ids[1 << 19];
    while (fgets(line, sizeof line, stdin) != NULL) {
        size_t n = 0;
        for (const char * p = line; p[0] && p[1] && p[0] != '\n'; p += 2) {
            unsigned v;
            if (sscanf(p, "%2x", &v) != 1) {
                return 2;
            }
            text[n++] = (char) v;
        }
        int k = llama_tokenize(vocab, text, (int32_t) n, ids, 1 << 19, special, special);
        if (k < 0) {
            return 1;
        }
        for (int i = 0; i < k; i++) {
            printf(i ? " %d" : "%d", ids[i]);
        }
        printf("\n");
    }
    return 0;
}

// detokenize_lines answers --detokenize: ids a line, the text out in hex.
static int detokenize_lines(const struct llama_vocab * vocab) {
    static char line[1 << 20];
    static char text[1 << 20];
    static llama_token ids[1 << 18];
    while (fgets(line, sizeof line, stdin) != NULL) {
        int n = 0;
        for (char * p = strtok(line, " \n"); p != NULL && n < (1 << 18); p = strtok(NULL, " \n")) {
            ids[n++] = atoi(p);
        }
        int k = llama_detokenize(vocab, ids, n, text, sizeof text, false, false);
        if (k < 0) {
            return 1;
        }
        for (int i = 0; i < k; i++) {
            printf("%02x", (unsigned char) text[i]);
        }
        printf("\n");
    }
    return 0;
}

int main(int argc, char ** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s BACKENDS_DIR MODEL.gguf [--lora ADAPTER.gguf] ID ... | --tokenize | --tokenize-special | --detokenize\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    ggml_backend_load_all_from_path(argv[1]);
    llama_backend_init();
    if (strcmp(argv[2], "--quantize") == 0) {
        if (argc != 6) {
            fprintf(stderr, "llama_logits: --quantize IN OUT TYPE\n");
            return 2;
        }
        struct llama_model_quantize_params qp = llama_model_quantize_default_params();
        qp.nthread = 1;
        if (strcmp(argv[5], "q8_0") == 0) {
            qp.ftype = LLAMA_FTYPE_MOSTLY_Q8_0;
        } else if (strcmp(argv[5], "q4_0") == 0) {
            qp.ftype = LLAMA_FTYPE_MOSTLY_Q4_0;
        } else if (strcmp(argv[5], "q4_k_m") == 0) {
            qp.ftype = LLAMA_FTYPE_MOSTLY_Q4_K_M;
        } else {
            fprintf(stderr, "llama_logits: unknown type %s\n", argv[5]);
            return 2;
        }
        return llama_model_quantize(argv[3], argv[4], &qp) == 0 ? 0 : 1;
    }
    const bool tokens = argc == 4 && strncmp(argv[3], "--", 2) == 0;
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.vocab_only = tokens;
    mp.progress_callback = no_progress;
    struct llama_model * model = llama_model_load_from_file(argv[2], mp);
    if (model == NULL) {
        fprintf(stderr, "llama_logits: cannot load %s\n", argv[2]);
        return 1;
    }
    const struct llama_vocab * vocab = llama_model_get_vocab(model);
    if (tokens) {
        if (strcmp(argv[3], "--detokenize") == 0) {
            return detokenize_lines(vocab);
        }
        return tokenize_lines(vocab, strcmp(argv[3], "--tokenize-special") == 0);
    }
    int a = 3;
    struct llama_adapter_lora * lora = NULL;
    if (a + 1 < argc && strcmp(argv[a], "--lora") == 0) {
        lora = llama_adapter_lora_init(model, argv[a + 1]);
        if (lora == NULL) {
            fprintf(stderr, "llama_logits: cannot load the adapter %s\n", argv[a + 1]);
            return 1;
        }
        a += 2;
    }
    int generate = 0;
    if (a + 1 < argc && strcmp(argv[a], "--generate") == 0) {
        generate = atoi(argv[a + 1]);
        a += 2;
    }
    const int n_tokens = argc - a;
    if (n_tokens < 1) {
        fprintf(stderr, "llama_logits: no tokens\n");
        return 2;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) (n_tokens + generate < 64 ? 64 : n_tokens + generate);
    cp.n_batch = cp.n_ctx;
    cp.n_ubatch = cp.n_ctx;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    struct llama_context * ctx = llama_init_from_model(model, cp);
    if (ctx == NULL) {
        fprintf(stderr, "llama_logits: cannot make a context\n");
        return 1;
    }
    if (lora != NULL) {
        float scale = 1.0f;
        if (llama_set_adapters_lora(ctx, &lora, 1, &scale) != 0) {
            fprintf(stderr, "llama_logits: cannot apply the adapter\n");
            return 1;
        }
    }
    struct llama_batch batch = llama_batch_init(n_tokens, 0, 1);
    for (int i = 0; i < n_tokens; i++) {
        batch.token[i] = atoi(argv[a + i]);
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n_tokens;
    if (llama_decode(ctx, batch) != 0) {
        fprintf(stderr, "llama_logits: decode failed\n");
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(vocab);
    for (int k = 0, pos = n_tokens; k < generate; k++, pos++) {
        const float * l = llama_get_logits_ith(ctx, -1);
        llama_token best = 0;
        for (int j = 1; j < n_vocab; j++) {
            if (l[j] > l[best]) {
                best = j;
            }
        }
        if (llama_vocab_is_eog(vocab, best)) {
            break;
        }
        printf(k ? " %d" : "%d", best);
        batch.token[0] = best;
        batch.pos[0] = pos;
        batch.n_tokens = 1;
        if (llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "llama_logits: decode failed\n");
            return 1;
        }
    }
    if (generate > 0) {
        printf("\n");
    }
    for (int i = 0; i < n_tokens && generate == 0; i++) {
        const float * l = llama_get_logits_ith(ctx, i);
        for (int j = 0; j < n_vocab; j++) {
            printf(j ? " %.9g" : "%.9g", l[j]);
        }
        printf("\n");
    }
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
