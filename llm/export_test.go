package llm

// WriteTestModel lets the Lua library's test (package llm_test) write the
// test model.
var WriteTestModel = writeTestModel
