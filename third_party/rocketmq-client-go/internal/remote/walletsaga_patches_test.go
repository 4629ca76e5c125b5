package remote

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingWriter records each Write it is given.
type countingWriter struct {
	writes [][]byte
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, append([]byte(nil), p...))
	return len(p), nil
}

// walletsaga patch 14: a request goes to the connection in one Write, and its bytes are the
// frame the broker reads: total length, header length (with the codec's mark), header, body.
func TestACommandIsWrittenInOneWrite(t *testing.T) {
	for _, codec := range []byte{JsonCodecs, RocketMQCodecs} {
		old := codecType
		codecType = codec
		cmd := NewRemotingCommand(10, &testHeader{}, []byte("the body of the message"))
		cmd.ExtFields = map[string]string{"topic": "t", "queueId": "3"}

		var w countingWriter
		require.NoError(t, cmd.WriteTo(&w))
		codecType = old
		require.Len(t, w.writes, 1, "codec %d", codec)

		frame := w.writes[0]
		require.GreaterOrEqual(t, len(frame), 8)
		total := int(binary.BigEndian.Uint32(frame[:4]))
		assert.Equal(t, len(frame)-4, total, "the length counts everything after itself")
		headerLen := int(binary.BigEndian.Uint32(frame[4:8]) & 0xFFFFFF)
		assert.Equal(t, codec, frame[4], "the codec's mark")
		assert.True(t, bytes.HasSuffix(frame, cmd.Body), "the body ends the frame")
		assert.Equal(t, 8+headerLen+len(cmd.Body), len(frame))

		back, err := decode(frame[4:])
		require.NoError(t, err)
		assert.Equal(t, cmd.Code, back.Code)
		assert.Equal(t, cmd.Body, back.Body)
		assert.Equal(t, "3", back.ExtFields["queueId"])
	}
}
