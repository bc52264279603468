package service

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"github.com/compactord/compactord/cache"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/clip"
	"github.com/compactord/compactord/internal/grpcerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// sourceRetry is the RetryInfo delay of an Expand the store could not answer: about the
// cache's circuit breaker cooldown.
const sourceRetry = 1e9 // 1 s

// expandPageSlack is what a page leaves of the message-size limit for the response's own
// fields and each message's framing.
const expandPageSlack = 4 << 10

// hexHash matches a source hash.
var hexHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Expand implements CompactorService.Expand: the messages of the caller's tenant's source
// the request names, one page at a time within the server's message-size limit.
func (s *Server) Expand(ctx context.Context, req *compactorv1.ExpandRequest) (*compactorv1.ExpandResponse, error) {
	hash, cite, whole, err := expandTarget(req)
	if err != nil {
		return nil, toStatus(err)
	}
	from, tr := -1, engine.SourceRange{}
	if cite.Source == "" { // else the token names the earlier source, known once found
		if from, tr, err = pageStart(req.GetPageToken(), hash); err != nil {
			return nil, toStatus(err)
		}
	}
	if req.GetPageSize() < 0 {
		return nil, toStatus(invalid("page_size", "must not be negative"))
	}
	if s.sources == nil {
		return nil, status.Errorf(codes.NotFound, "source %s not found: this server keeps no sources (--source-ttl 0)", hash)
	}
	entries, err := s.loadSource(ctx, hash)
	if err != nil {
		return nil, err
	}
	if cite.Source != "" {
		if hash, entries, err = s.earlierSource(ctx, hash, entries, cite.Source); err != nil {
			return nil, err
		}
		if from, tr, err = pageStart(req.GetPageToken(), hash); err != nil {
			return nil, toStatus(err)
		}
	}
	r := cite.Range
	if whole {
		r = engine.SourceRange{First: 0, Last: len(entries) - 1}
	}
	if r.Last >= len(entries) {
		field := "range"
		if req.GetRange() == "" { // the range the message's marker names
			field = "message"
		}
		return nil, toStatus(invalid(field, fmt.Sprintf("%s is past the source's last message, m%d", r, len(entries)-1)))
	}
	if from >= 0 && tr != r {
		return nil, toStatus(errBadToken)
	}
	return s.expandPage(entries, hash, r, max(from, r.First), int(req.GetPageSize()))
}

// loadSource returns the messages (encoded) of the caller's tenant's source hash, or the
// status Expand fails with.
func (s *Server) loadSource(ctx context.Context, hash string) ([][]byte, error) {
	var h [32]byte
	_, _ = hex.Decode(h[:], []byte(hash)) // a hexHash
	b, err := s.sources.GetSource(ctx, cache.NewSourceRef(tenant(ctx), h))
	switch {
	case errors.Is(err, cache.ErrNotFound):
		return nil, status.Errorf(codes.NotFound, "source %s not found: unknown, expired, or not this tenant's", hash)
	case errors.Is(err, cache.ErrUnavailable):
		return nil, grpcerr.WithDetails(status.New(codes.Unavailable, "source store unavailable: "+err.Error()),
			grpcerr.ErrorInfo("SOURCE_STORE_UNAVAILABLE", nil), grpcerr.RetryInfo(sourceRetry))
	case err != nil:
		return nil, toStatus(err)
	}
	entries, err := sourceEntries(b)
	if err != nil {
		return nil, status.Errorf(codes.DataLoss, "source %s: %v", hash, err)
	}
	return entries, nil
}

// maxSourceHops bounds how many summaries back earlierSource follows source markers.
const maxSourceHops = 8

// earlierSource finds the earlier source a qualified citation names by its hash prefix: the
// source of a summary message in the source hash (entries), or, a summary building on
// summaries, in theirs, up to maxSourceHops back. It returns that source's hash and
// messages.
func (s *Server) earlierSource(ctx context.Context, hash string, entries [][]byte, prefix string) (string, [][]byte, error) {
	seen := map[string]bool{hash: true}
	for range maxSourceHops {
		newest := "" // the newest summary's source holds the older ones
		for i, e := range entries {
			m, err := decodeMessage(e)
			if err != nil {
				return "", nil, status.Errorf(codes.DataLoss, "source %s: m%d: %v", hash, i, err)
			}
			if m.GetKind() != compactorv1.MessageKind_MESSAGE_KIND_COMPACT_SUMMARY {
				continue
			}
			if h, _, ok := engine.ParseSourceMarker(messageText(m)); ok && !seen[h] {
				if strings.HasPrefix(h, prefix) {
					found, err := s.loadSource(ctx, h)
					return h, found, err
				}
				seen[h] = true
				newest = h
			}
		}
		if newest == "" {
			break
		}
		hash = newest
		var err error
		if entries, err = s.loadSource(ctx, hash); err != nil {
			return "", nil, err
		}
	}
	return "", nil, status.Errorf(codes.NotFound, "source s%s not found: no summary of this source names it", prefix)
}

// expandPage is the page of entries (the source hash's) from index from within r: as many
// messages as pageSize allows (0: any number) and the message-size limit holds, at least one.
func (s *Server) expandPage(entries [][]byte, hash string, r engine.SourceRange, from, pageSize int) (*compactorv1.ExpandResponse, error) {
	resp := &compactorv1.ExpandResponse{FirstIndex: int32(from), TotalMessages: int32(len(entries)), SourceHash: hash}
	room := s.maxMessageBytes - expandPageSlack
	i := from
	for ; i <= r.Last; i++ {
		if pageSize > 0 && len(resp.Messages) == pageSize {
			break
		}
		if room -= len(entries[i]) + 8; room < 0 && len(resp.Messages) > 0 {
			break
		}
		m, err := decodeMessage(entries[i])
		if err != nil {
			return nil, status.Errorf(codes.DataLoss, "source %s: m%d: %v", hash, i, err)
		}
		resp.Messages = append(resp.Messages, m)
	}
	if i <= r.Last {
		resp.NextPageToken = pageToken(hash, r, i)
	}
	return resp, nil
}

// expandTarget reads which source and which of its messages req asks for: the hash, the
// citation (its range, and the prefix of an earlier source's hash when it is qualified), and
// whether the range is the whole source (no range, and a hash rather than a summary message,
// whose marker names its range).
func expandTarget(req *compactorv1.ExpandRequest) (hash string, c engine.Citation, whole bool, err error) {
	var r engine.SourceRange
	switch {
	case req.GetMessage() != nil && req.GetSourceHash() != "":
		return "", c, false, invalid("source_hash", "give message or source_hash, not both")
	case req.GetMessage() != nil:
		var ok bool
		if hash, r, ok = engine.ParseSourceMarker(messageText(req.GetMessage())); !ok {
			return "", c, false, invalid("message", "names no source: it carries no source marker line")
		}
	case req.GetSourceHash() != "":
		hash = strings.ToLower(req.GetSourceHash())
		if !hexHash.MatchString(hash) {
			return "", c, false, invalid("source_hash", "must be 64 hex digits (CompactResponse.source_hash)")
		}
		whole = true
	default:
		return "", c, false, invalid("source_hash", "give message or source_hash")
	}
	c.Range = r
	if req.GetRange() != "" {
		if c, err = engine.ParseCitation(req.GetRange()); err != nil {
			return "", c, false, invalid("range", fmt.Sprintf("%q: %v (want a citation such as [m12–18], [s1a2b3c4d m12–18], m12–m18, or 12-18)", clip.String(req.GetRange(), 64), err))
		}
		whole = false
	}
	return hash, c, whole, nil
}

// messageText is the text parts of m, joined.
func messageText(m *compactorv1.Message) string {
	var b strings.Builder
	for _, p := range m.GetParts() {
		if t := p.GetText(); t != nil {
			b.WriteString(t.GetText())
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// pageToken is the opaque token of the page from index next of r in source hash.
func pageToken(hash string, r engine.SourceRange, next int) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s:%d:%d:%d", hash, r.First, r.Last, next))
}

// errBadToken is a page token that is not a next_page_token of the request's source and range.
var errBadToken = invalid("page_token", "not a next_page_token of this source and range")

// pageStart is the index a page token continues from, checked against the request's source,
// and the range the token pages (which the caller checks against the request's, once the
// source has said what the whole of it is); -1 without a token.
func pageStart(token, hash string) (int, engine.SourceRange, error) {
	if token == "" {
		return -1, engine.SourceRange{}, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, engine.SourceRange{}, errBadToken
	}
	f := strings.Split(string(raw), ":")
	if len(f) != 4 || f[0] != hash {
		return 0, engine.SourceRange{}, errBadToken
	}
	var n [3]int
	for i := range n {
		if n[i], err = strconv.Atoi(f[i+1]); err != nil || n[i] < 0 {
			return 0, engine.SourceRange{}, errBadToken
		}
	}
	if n[2] < n[0] || n[2] > n[1] {
		return 0, engine.SourceRange{}, errBadToken
	}
	return n[2], engine.SourceRange{First: n[0], Last: n[1]}, nil
}

// invalid is an INVALID_ARGUMENT naming field.
func invalid(field, why string) error {
	return &engine.ValidationError{Violations: []engine.FieldViolation{{Field: field, Description: why}}}
}
