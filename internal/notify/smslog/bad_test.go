package smslog_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/notify/smslog"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
)

// A page of bad messages carries at most BadBodyExcerpt bytes of each body, whatever its size
// (here a 4 MiB body, as an older release stored a whole broker message, a 64 KiB one cut
// inside a three-byte character at the excerpt's end, binary, and a small one), with
// body_bytes its whole size and body_truncated when cut; BadMessage has each body whole; a
// page holds at most MaxBadMessagePage, and a larger limit is refused.
func TestBadMessagesCarryAnExcerptOfEachBody(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	big := strings.Repeat("{", 4<<20)
	// "中" is three bytes: after "ab", the excerpt (4096 bytes) ends inside a character, which
	// the page's text leaves out.
	cjk := "ab" + strings.Repeat("中", (64<<10)/3)
	binary := bytes.Repeat([]byte{0xff, 0x00, 0x01}, 30000)
	small := `{"v":9}`
	_, err := pool.Exec(ctx, `
INSERT INTO notify.bad_messages (msg_id, queue, queue_offset, body, reason, received_at) VALUES
('BIG', 'q@0', 1, convert_to($1, 'UTF8'), 'too big', $5),
('CJK', 'q@0', 2, convert_to($2, 'UTF8'), 'not JSON', $5 + interval '1 second'),
('BIN', 'q@0', 3, $3, 'not UTF-8', $5 + interval '2 seconds'),
('SMALL', 'q@0', 4, convert_to($4, 'UTF8'), 'unsupported version 9', $5 + interval '3 seconds')`, big, cjk, binary, small, t0)
	require.NoError(t, err)
	s := smslog.NewStore(pool)

	page, err := s.BadMessages(ctx, 0, "")
	require.NoError(t, err)
	require.Len(t, page.Items, 4)
	byID := map[string]smslog.BadMessage{}
	for _, m := range page.Items {
		byID[m.MsgID] = m
		require.LessOrEqual(t, len(m.Body), smslog.BadBodyExcerpt, m.MsgID)
		raw, err := base64.StdEncoding.DecodeString(m.BodyBase64)
		require.NoError(t, err)
		require.LessOrEqual(t, len(raw), smslog.BadBodyExcerpt, m.MsgID)
	}
	require.Equal(t, int64(len(big)), byID["BIG"].BodyBytes)
	require.True(t, byID["BIG"].BodyTruncated)
	require.Equal(t, big[:smslog.BadBodyExcerpt], byID["BIG"].Body, "the body's first 4 KiB")

	cut := byID["CJK"]
	require.Equal(t, int64(len(cjk)), cut.BodyBytes)
	require.True(t, cut.BodyTruncated)
	require.True(t, utf8.ValidString(cut.Body), "a text body cut inside a character reads as text")
	require.True(t, strings.HasPrefix(cjk, cut.Body))
	require.NotZero(t, (smslog.BadBodyExcerpt-2)%3, "the excerpt does split a character")
	require.Equal(t, 2+3*((smslog.BadBodyExcerpt-2)/3), len(cut.Body), "cut before the character the excerpt splits")

	bin := byID["BIN"]
	raw, err := base64.StdEncoding.DecodeString(bin.BodyBase64)
	require.NoError(t, err)
	require.Equal(t, binary[:smslog.BadBodyExcerpt], raw)
	require.Empty(t, bin.Body)
	require.Equal(t, int64(len(binary)), bin.BodyBytes)
	require.True(t, bin.BodyTruncated)

	require.Equal(t, small, byID["SMALL"].Body)
	require.Equal(t, int64(len(small)), byID["SMALL"].BodyBytes)
	require.False(t, byID["SMALL"].BodyTruncated)

	// One message: its body whole.
	for id, want := range map[string]string{"BIG": big, "CJK": cjk, "SMALL": small} {
		m, err := s.BadMessage(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, m.Body, id)
		require.Equal(t, int64(len(want)), m.BodyBytes, id)
		require.False(t, m.BodyTruncated, id)
	}
	m, err := s.BadMessage(ctx, "BIN")
	require.NoError(t, err)
	require.Equal(t, base64.StdEncoding.EncodeToString(binary), m.BodyBase64)
	require.Equal(t, "not UTF-8", m.Reason)
	require.Equal(t, int64(3), m.QueueOffset)

	_, err = s.BadMessage(ctx, "NOPE")
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err), "%v", err)
	for _, id := range []string{"", "a b", "a/b", "é", strings.Repeat("a", 129)} {
		_, err = s.BadMessage(ctx, id)
		require.Equal(t, apperr.Invalid, apperr.CodeOf(err), "%q: %v", id, err)
	}

	// At most MaxBadMessagePage a page; the default page fits within it.
	_, err = s.BadMessages(ctx, smslog.MaxBadMessagePage+1, "")
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	require.ErrorContains(t, err, "limit must be between 1 and 100")
	page, err = s.BadMessages(ctx, smslog.MaxBadMessagePage, "")
	require.NoError(t, err)
	require.Len(t, page.Items, 4)
}
