// Command go-client drives Switchboard's REST API with the client oapi-codegen
// generated from the served OpenAPI document (package api): register, create
// an API key, create an on-demand publish task with it, trigger the task and
// list its runs.
//
//	go run . -url http://127.0.0.1:8080 -email me@example.com -password password-123
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/switchboard/switchboard/examples/go-client/api"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "Switchboard base URL")
	email := flag.String("email", fmt.Sprintf("go-client-%d@example.com", time.Now().UnixNano()), "account to register")
	password := flag.String("password", "password-123", "its password (at least 8 characters)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, *url, *email, *password); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

// bearer sends token as the Authorization of every request.
func bearer(token string) api.ClientOption {
	return api.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	})
}

// check turns a non-2xx answer into an error that carries the problem body.
func check(what string, res *http.Response, body []byte, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s: %s", what, res.Status, body)
	}
	return nil
}

func run(ctx context.Context, url, email, password string) error {
	anon, err := api.NewClientWithResponses(url)
	if err != nil {
		return err
	}
	reg, err := anon.AuthRegisterWithResponse(ctx, api.AuthRegisterJSONRequestBody{Email: openapi_types.Email(email), Password: password})
	if err := check("register", reg.HTTPResponse, reg.Body, err); err != nil {
		return err
	}
	session, err := api.NewClientWithResponses(url, bearer(reg.JSON201.Token))
	if err != nil {
		return err
	}
	key, err := session.ApiKeyCreateWithResponse(ctx, nil, api.ApiKeyCreateJSONRequestBody{Name: "go-client"})
	if err := check("create API key", key.HTTPResponse, key.Body, err); err != nil {
		return err
	}
	c, err := api.NewClientWithResponses(url, bearer(key.JSON201.Secret))
	if err != nil {
		return err
	}

	var action api.Action
	if err := action.FromPublishAction(api.PublishAction{Type: api.Publish, Event: "go.hello", Payload: map[string]any{"from": "go"}}); err != nil {
		return err
	}
	task, err := c.TaskCreateWithResponse(ctx, nil, api.TaskCreateJSONRequestBody{Name: "go-client", Action: action}) // no schedule: on demand
	if err := check("create task", task.HTTPResponse, task.Body, err); err != nil {
		return err
	}
	trig, err := c.TaskRunCreateWithResponse(ctx, task.JSON201.Id, nil, api.TaskRunCreateJSONRequestBody{})
	if err := check("trigger", trig.HTTPResponse, trig.Body, err); err != nil {
		return err
	}
	fmt.Printf("task %s: run %s %s\n", task.JSON201.Id, trig.JSON202.Id, trig.JSON202.Status)

	runs, err := c.TaskRunListWithResponse(ctx, task.JSON201.Id, &api.TaskRunListParams{})
	if err := check("list runs", runs.HTTPResponse, runs.Body, err); err != nil {
		return err
	}
	for _, r := range runs.JSON200.Items {
		fmt.Printf("run %s %s\n", r.Id, r.Status)
	}
	return nil
}
