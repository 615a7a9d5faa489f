package tests

import (
	"context"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/llm"
	"github.com/gglua/gglua/luabind"
	"github.com/gglua/gglua/runtime"
)

// Every documented function that takes an options table refuses a name it
// does not know, naming itself and the option (issue [18]): a misspelt
// option is an error, never ignored. The calls below are each function's
// with OPTS where its options table goes; the test fails for a documented
// function with an options table that has no call here, so a new one must
// be added.
var optionCalls = map[string]string{
	"tensor.zeros":         "tensor.zeros(2, OPTS)",
	"tensor.ones":          "tensor.ones(2, OPTS)",
	"tensor.full":          "tensor.full({2}, 1, OPTS)",
	"tensor.scalar_tensor": "tensor.scalar_tensor(1, OPTS)",
	"tensor.rand":          "tensor.rand(2, OPTS)",
	"tensor.randn":         "tensor.randn(2, OPTS)",
	"tensor.randint":       "tensor.randint(5, {2}, OPTS)",
	"tensor.randperm":      "tensor.randperm(3, OPTS)",
	"tensor.arange":        "tensor.arange(3, OPTS)",
	"tensor.eye":           "tensor.eye(2, OPTS)",
	"tensor.zeros_like":    "tensor.zeros_like(X, OPTS)",
	"tensor.ones_like":     "tensor.ones_like(X, OPTS)",
	"tensor.full_like":     "tensor.full_like(X, 2, OPTS)",
	"tensor.rand_like":     "tensor.rand_like(X, OPTS)",
	"tensor.randn_like":    "tensor.randn_like(X, OPTS)",
	"x:index_add":          "X:index_add(1, tensor{1, 2}:int(), tensor.ones(2, 3), OPTS)",
	"x:index_add_":         "X:clone():index_add_(1, tensor{1, 2}:int(), tensor.ones(2, 3), OPTS)",
	"to_gpu":               "to_gpu(X, OPTS)",
	"x:new_zeros":          "X:new_zeros(2, OPTS)",
	"x:new_ones":           "X:new_ones(2, OPTS)",
	"x:new_full":           "X:new_full({2}, 1, OPTS)",

	"nn.mse_loss":                         "nn.mse_loss(X, X, OPTS)",
	"nn.l1_loss":                          "nn.l1_loss(X, X, OPTS)",
	"nn.smooth_l1_loss":                   "nn.smooth_l1_loss(X, X, OPTS)",
	"nn.huber_loss":                       "nn.huber_loss(X, X, OPTS)",
	"nn.bce_loss":                         "nn.bce_loss(X:sigmoid(), X:sigmoid(), OPTS)",
	"nn.binary_cross_entropy_with_logits": "nn.binary_cross_entropy_with_logits(X, X:sigmoid(), OPTS)",
	"nn.bce_with_logits":                  "nn.bce_with_logits(X, X:sigmoid(), OPTS)",
	"nn.cross_entropy":                    "nn.cross_entropy(X, {1, 2}, OPTS)",
	"nn.nll_loss":                         "nn.nll_loss(X:log_softmax(2), {1, 2}, OPTS)",
	"nn.kl_div":                           "nn.kl_div(X:log_softmax(2), X:softmax(2), OPTS)",
	"nn.conv1d":                           "nn.conv1d(tensor.randn(1, 2, 5), tensor.randn(3, 2, 2), OPTS)",
	"nn.conv2d":                           "nn.conv2d(tensor.randn(1, 2, 5, 5), tensor.randn(3, 2, 2, 2), OPTS)",
	"nn.conv_transpose1d":                 "nn.conv_transpose1d(tensor.randn(1, 2, 5), tensor.randn(2, 3, 2), MERGE({stride = 2}, OPTS))",
	"nn.conv_transpose2d":                 "nn.conv_transpose2d(tensor.randn(1, 2, 5, 5), tensor.randn(2, 3, 2, 2), MERGE({stride = 2}, OPTS))",
	"nn.max_pool1d":                       "nn.max_pool1d(tensor.randn(1, 2, 6), 2, OPTS)",
	"nn.max_pool2d":                       "nn.max_pool2d(tensor.randn(1, 2, 6, 6), 2, OPTS)",
	"nn.avg_pool1d":                       "nn.avg_pool1d(tensor.randn(1, 2, 6), 2, OPTS)",
	"nn.avg_pool2d":                       "nn.avg_pool2d(tensor.randn(1, 2, 6, 6), 2, OPTS)",
	"nn.batch_norm":                       "nn.batch_norm(tensor.randn(4, 3), tensor.zeros(3), tensor.ones(3), OPTS)",
	"nn.group_norm":                       "nn.group_norm(tensor.randn(2, 4, 3), 2, OPTS)",
	"nn.rms_norm":                         "nn.rms_norm(X, {3}, OPTS)",
	"nn.scaled_dot_product_attention":     "nn.scaled_dot_product_attention(tensor.randn(2, 3, 4), tensor.randn(2, 3, 4), tensor.randn(2, 3, 4), OPTS)",
	"nn.Linear":                           "nn.Linear(3, 2, OPTS)",
	"nn.Embedding":                        "nn.Embedding(5, 3, OPTS)",
	"nn.RMSNorm":                          "nn.RMSNorm(3, OPTS)",
	"nn.GroupNorm":                        "nn.GroupNorm(2, 4, OPTS)",
	"nn.BatchNorm1d":                      "nn.BatchNorm1d(3, OPTS)",
	"nn.BatchNorm2d":                      "nn.BatchNorm2d(3, OPTS)",
	"nn.Conv1d":                           "nn.Conv1d(2, 3, 2, OPTS)",
	"nn.Conv2d":                           "nn.Conv2d(2, 3, 2, OPTS)",
	"nn.ConvTranspose1d":                  "nn.ConvTranspose1d(2, 3, 2, MERGE({stride = 2}, OPTS))",
	"nn.ConvTranspose2d":                  "nn.ConvTranspose2d(2, 3, 2, MERGE({stride = 2}, OPTS))",
	"nn.MaxPool1d":                        "nn.MaxPool1d(2, OPTS)",
	"nn.MaxPool2d":                        "nn.MaxPool2d(2, OPTS)",
	"nn.AvgPool1d":                        "nn.AvgPool1d(2, OPTS)",
	"nn.AvgPool2d":                        "nn.AvgPool2d(2, OPTS)",
	"nn.RNN":                              "nn.RNN(3, 4, OPTS)",
	"nn.GRU":                              "nn.GRU(3, 4, OPTS)",
	"nn.LSTM":                             "nn.LSTM(3, 4, OPTS)",
	"nn.MultiheadAttention":               "nn.MultiheadAttention(4, 2, OPTS)",
	"nn.LayerNorm":                        "nn.LayerNorm(3, OPTS)",

	"optim.sgd":                            "optim.sgd({tensor.param(X)}, OPTS)",
	"optim.adam":                           "optim.adam({tensor.param(X)}, OPTS)",
	"optim.adamw":                          "optim.adamw({tensor.param(X)}, OPTS)",
	"optim.rmsprop":                        "optim.rmsprop({tensor.param(X)}, OPTS)",
	"optim.adagrad":                        "optim.adagrad({tensor.param(X)}, OPTS)",
	"optim.adadelta":                       "optim.adadelta({tensor.param(X)}, OPTS)",
	"optim.adamax":                         "optim.adamax({tensor.param(X)}, OPTS)",
	"optim.nadam":                          "optim.nadam({tensor.param(X)}, OPTS)",
	"optim.radam":                          "optim.radam({tensor.param(X)}, OPTS)",
	"optimizer:add_param_group":            "optim.sgd({tensor.param(X)}, {lr = 0.1}):add_param_group(MERGE({params = {tensor.param(tensor.randn(2))}}, OPTS))",
	"optim.lr_scheduler.step":              "optim.lr_scheduler.step(optim.sgd({tensor.param(X)}, {lr = 0.1}), MERGE({step_size = 2}, OPTS))",
	"optim.lr_scheduler.cosine":            "optim.lr_scheduler.cosine(optim.sgd({tensor.param(X)}, {lr = 0.1}), MERGE({t_max = 2}, OPTS))",
	"optim.lr_scheduler.multi_step":        "optim.lr_scheduler.multi_step(optim.sgd({tensor.param(X)}, {lr = 0.1}), MERGE({milestones = {2, 4}}, OPTS))",
	"optim.lr_scheduler.cosine_restarts":   "optim.lr_scheduler.cosine_restarts(optim.sgd({tensor.param(X)}, {lr = 0.1}), MERGE({t_0 = 2}, OPTS))",
	"optim.lr_scheduler.exponential":       "optim.lr_scheduler.exponential(optim.sgd({tensor.param(X)}, {lr = 0.1}), MERGE({gamma = 0.9}, OPTS))",
	"optim.lr_scheduler.linear":            "optim.lr_scheduler.linear(optim.sgd({tensor.param(X)}, {lr = 0.1}), OPTS)",
	"optim.lr_scheduler.one_cycle":         "optim.lr_scheduler.one_cycle(optim.sgd({tensor.param(X)}, {lr = 0.1}), MERGE({max_lr = 1, total = 4}, OPTS))",
	"optim.lr_scheduler.warmup_cosine":     "optim.lr_scheduler.warmup_cosine(optim.sgd({tensor.param(X)}, {lr = 0.1}), MERGE({warmup = 1, total = 4}, OPTS))",
	"optim.lr_scheduler.lambda":            "optim.lr_scheduler.lambda(optim.sgd({tensor.param(X)}, {lr = 0.1}), MERGE({lr_lambda = function(e) return 1 end}, OPTS))",
	"optim.lr_scheduler.reduce_on_plateau": "optim.lr_scheduler.reduce_on_plateau(optim.sgd({tensor.param(X)}, {lr = 0.1}), OPTS)",
	"optim.lr_scheduler.sequential":        "(function() local o = optim.sgd({tensor.param(X)}, {lr = 0.1}); return optim.lr_scheduler.sequential(o, MERGE({schedulers = {optim.lr_scheduler.exponential(o, {gamma = 0.9})}, milestones = {}}, OPTS)) end)()",
	"data.loader":                          "data.loader(X, OPTS)",
	"data.csv":                             "data.csv(CSV, OPTS)",
	"log.run":                              "log.run('opts', MERGE({dir = DIR}, OPTS))",
	"model:tokenize":                       "llm.load(GGUF):tokenize('the cat', OPTS)",
	"nn.MSELoss":                           "nn.MSELoss(OPTS)(X, X)",
	"nn.interpolate":                       "nn.interpolate(tensor.ones(1, 1, 2, 2), MERGE({scale_factor = 2}, OPTS))",
	"nn.Upsample":                          "nn.Upsample(MERGE({scale_factor = 2}, OPTS))(tensor.ones(1, 1, 2, 2))",
	"nn.L1Loss":                            "nn.L1Loss(OPTS)(X, X)",
	"nn.SmoothL1Loss":                      "nn.SmoothL1Loss(OPTS)(X, X)",
	"nn.HuberLoss":                         "nn.HuberLoss(OPTS)(X, X)",
	"nn.BCELoss":                           "nn.BCELoss(OPTS)(X:sigmoid(), X:sigmoid())",
	"nn.BCEWithLogitsLoss":                 "nn.BCEWithLogitsLoss(OPTS)(X, X:sigmoid())",
	"nn.CrossEntropyLoss":                  "nn.CrossEntropyLoss(OPTS)(X, {1, 2})",
	"nn.NLLLoss":                           "nn.NLLLoss(OPTS)(X:log_softmax(2), {1, 2})",
	"nn.KLDivLoss":                         "nn.KLDivLoss(OPTS)(X:log_softmax(2), X:softmax(2))",
	"llm.load":                             "llm.load(GGUF, OPTS)",
	"model:generate":                       "llm.load(GGUF):generate('the cat', MERGE({max_tokens = 2}, OPTS))",
	"model:lora":                           "llm.load(GGUF):lora(OPTS)",
	"model:save":                           "llm.load(GGUF):save(DIR .. '/saved.gguf', OPTS)",
}

// optionTable matches a signature's options table: a {...} holding name=.
var optionTable = regexp.MustCompile(`\{[a-z_]+=`)

func TestEveryOptionsTableRefusesUnknownNames(t *testing.T) {
	sections, err := luabind.Docs()
	require.NoError(t, err)
	var documented []string
	names := map[string]bool{}
	for _, s := range sections {
		for _, e := range s.Entries {
			names[e.Name] = true
			if _, listed := optionCalls[e.Name]; listed || optionTable.MatchString(e.Signature) {
				documented = append(documented, e.Name)
			}
		}
	}
	for name := range optionCalls {
		assert.True(t, names[name], "optionCalls has %s, which docs.txt does not document", name)
	}
	sort.Strings(documented)
	require.NotEmpty(t, documented)
	dir := t.TempDir()
	csv := dir + "/d.csv"
	require.NoError(t, os.WriteFile(csv, []byte("1,2\n3,4\n"), 0o644))
	gguf := dir + "/m.gguf"
	require.NoError(t, llm.WriteRandom(gguf, llm.TestShape, 1))
	for _, name := range documented {
		call, ok := optionCalls[name]
		if !assert.True(t, ok, "%s takes an options table: add a call to optionCalls", name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			rt, err := runtime.New(runtime.Options{Threads: 1, Stdout: io.Discard})
			require.NoError(t, err)
			defer rt.Close()
			prelude := "X = tensor.randn(2, 3)\nCSV = " + luaQuote(csv) + "\nDIR = " + luaQuote(dir) + "\nGGUF = " + luaQuote(gguf) + "\n" +
				"function MERGE(a, b) for k, v in pairs(b or {}) do a[k] = v end return a end\n"
			// Without options it runs (the call is right), with an unknown
			// one it is refused, naming the option.
			plain := strings.ReplaceAll(call, ", OPTS)", ")")
			if strings.Contains(call, "MERGE(") {
				plain = strings.ReplaceAll(call, "OPTS", "nil")
			}
			_, err = rt.DoString(context.Background(), prelude+plain)
			require.NoError(t, err, "%s", plain)
			_, err = rt.DoString(context.Background(), prelude+strings.ReplaceAll(call, "OPTS", "{no_such_option = 1}"))
			require.Error(t, err, "%s accepted an unknown option", name)
			assert.Contains(t, err.Error(), "no_such_option", name)
			assert.Contains(t, err.Error(), "unknown option", name)
		})
	}
}

func luaQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "\\'") + "'" }
