package web

import (
	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
)

// IDPath is the {id} of every route that names a resource by id. Ids are
// read once, here: any spelling of a UUID that RFC 9562 parsers accept
// (either case, urn:uuid: prefix, braces, no hyphens) becomes the lowercase
// hyphenated form the API answers with, so an upper-case id finds the same
// user, task or node. Anything else is a 422 from Huma's uuid format check,
// which accepts exactly the spellings uuid.Parse does. Input types embed it
// (exported: Huma reads only exported fields).
type IDPath struct {
	ID string `path:"id" format:"uuid" doc:"a UUID; any case, urn:uuid: and {…} spellings are read as the lowercase form"`
}

// Resolve canonicalises the id after Huma has validated it.
func (p *IDPath) Resolve(huma.Context) []error {
	p.ID = canonicalID(p.ID)
	return nil
}

// canonicalID is id in lowercase hyphenated form, or id unchanged when it
// is not a UUID (validation reports that).
func canonicalID(id string) string {
	u, err := uuid.Parse(id)
	if err != nil {
		return id
	}
	return u.String()
}
