// Command embed shows gglua as a library: a Go program hands training data
// to a Lua script, lets it train a model on the device, and reads the trained
// weights back.
//
//	go run ./examples/embed
package main

import (
	"context"
	"fmt"
	"log"
	"math/rand"

	"github.com/gglua/gglua/core"
	"github.com/gglua/gglua/runtime"
)

// The script sees x, y and epochs as globals, and leaves the weights in w
// and b.
const script = `
local model = nn.Linear(3, 1)
local opt = optim.adam(model:parameters(), {lr = 0.05})
for epoch = 1, epochs do
  for xb, yb in data.loader(x, y, {batch = 32, shuffle = true}) do
    opt:zero_grad()
    backward(with_grad_tape(function() return nn.mse_loss(model(xb), yb) end))
    opt:step()
  end
end
w, b = model.weight, model.bias
return nn.mse_loss(model(x), y):item()
`

func main() {
	// Data made in Go: y = 0.5 x1 - 2 x2 + 3 x3 + 1.
	rng := rand.New(rand.NewSource(1))
	const n = 256
	xs, ys := make([]float32, 0, 3*n), make([]float32, 0, n)
	for i := 0; i < n; i++ {
		a, b, c := rng.Float32()*2-1, rng.Float32()*2-1, rng.Float32()*2-1
		xs = append(xs, a, b, c)
		ys = append(ys, 0.5*a-2*b+3*c+1)
	}
	x, err := core.FromFloat32(xs, n, 3) // shares xs, no copy
	if err != nil {
		log.Fatal(err)
	}
	y, err := core.FromFloat32(ys, n, 1)
	if err != nil {
		log.Fatal(err)
	}

	rt, err := runtime.New(runtime.Options{Threads: 2, Sandbox: true})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()
	rt.SetTensor("x", x)
	rt.SetTensor("y", y)
	if err := rt.SetGlobal("epochs", 60); err != nil {
		log.Fatal(err)
	}
	vals, err := rt.DoString(context.Background(), script)
	if err != nil {
		log.Fatal(err)
	}

	w, err := rt.Tensor("w")
	if err != nil {
		log.Fatal(err)
	}
	b, err := rt.Tensor("b")
	if err != nil {
		log.Fatal(err)
	}
	wv, _ := w.Float32s()
	bv, _ := b.Float32s()
	fmt.Printf("final mse %.5f\n", vals[0])
	fmt.Printf("learnt y = %.3f x1 %+.3f x2 %+.3f x3 %+.3f (true: 0.5, -2, 3, 1)\n", wv[0], wv[1], wv[2], bv[0])
	fmt.Printf("weights resident in the %s pool; %d bytes held on the device\n", w.Scope(), rt.Engine().Residency().Ledger().PBufferBytes)
}
