// Package docs holds what the server serves of its documentation:
// openapi.json, the API described for machines (api.md says the same for
// people). The pages themselves are run by docs_test.go.
package docs

import _ "embed"

// OpenAPI is openapi.json, the OpenAPI 3.1 document of the HTTP API,
// served at GET /openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte
