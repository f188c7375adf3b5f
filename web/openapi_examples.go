package web

// operationExamples are the documented examples of every operation, by
// operation id. TestOpenAPIDocument checks that each operation has one and
// that each is valid against its schema.
var operationExamples = map[string][]example{}
