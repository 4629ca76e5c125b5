package admin

// Tests of walletsaga's patch 10 to the admin client (see WALLETSAGA-PATCHES.md at the
// module's root). The admin builds its own remoting client, so the broker here is a
// loopback listener speaking the remoting protocol as far as these requests need.

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/apache/rocketmq-client-go/v2/internal"
	"github.com/apache/rocketmq-client-go/v2/internal/remote"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

var patchCredentials = primitive.Credentials{AccessKey: "patch-ak", SecretKey: "patch-sk"}

// patchBroker answers each request with answer and records it.
type patchBroker struct {
	addr   string
	answer func(req *remote.RemotingCommand) *remote.RemotingCommand

	mu       sync.Mutex
	requests []*remote.RemotingCommand
}

func startPatchBroker(t *testing.T, answer func(*remote.RemotingCommand) *remote.RemotingCommand) *patchBroker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	b := &patchBroker{addr: ln.Addr().String(), answer: answer}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go b.serve(conn)
		}
	}()
	return b
}

// serve reads frames (length, header length, JSON header, body) and answers each.
func (b *patchBroker) serve(conn net.Conn) {
	defer conn.Close()
	for {
		var frameLen int32
		if err := binary.Read(conn, binary.BigEndian, &frameLen); err != nil {
			return
		}
		frame := make([]byte, frameLen)
		if _, err := io.ReadFull(conn, frame); err != nil {
			return
		}
		headerLen := binary.BigEndian.Uint32(frame[:4]) & 0xFFFFFF
		req := &remote.RemotingCommand{}
		if err := json.Unmarshal(frame[4:4+headerLen], req); err != nil {
			return
		}
		req.Body = frame[4+headerLen:]
		b.mu.Lock()
		b.requests = append(b.requests, req)
		b.mu.Unlock()
		res := b.answer(req)
		res.Opaque = req.Opaque
		res.Flag |= remote.ResponseType
		if err := res.WriteTo(conn); err != nil {
			return
		}
	}
}

func (b *patchBroker) received() []*remote.RemotingCommand {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*remote.RemotingCommand(nil), b.requests...)
}

// requireSigned checks a request as a broker with access control does: the access key,
// and an HMAC-SHA1 signature over its other fields' values in key order, then its body.
func requireSigned(t *testing.T, req *remote.RemotingCommand) {
	t.Helper()
	require.Equal(t, patchCredentials.AccessKey, req.ExtFields["AccessKey"], "request %d is not signed", req.Code)
	keys := make([]string, 0, len(req.ExtFields))
	for k := range req.ExtFields {
		if k != "Signature" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	mac := hmac.New(sha1.New, []byte(patchCredentials.SecretKey))
	for _, k := range keys {
		mac.Write([]byte(req.ExtFields[k]))
	}
	mac.Write(req.Body)
	require.Equal(t, base64.StdEncoding.EncodeToString(mac.Sum(nil)), req.ExtFields["Signature"],
		"request %d has a wrong signature", req.Code)
}

func newPatchAdmin(t *testing.T, opts ...AdminOption) *admin {
	opts = append([]AdminOption{WithResolver(primitive.NewPassthroughResolver([]string{"192.0.2.1:9876"}))}, opts...)
	adm, err := NewAdmin(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = adm.Close() })
	return adm
}

func succeed(*remote.RemotingCommand) *remote.RemotingCommand {
	return &remote.RemotingCommand{Code: internal.ResSuccess}
}

// Patch 10: an admin given credentials signs its requests to brokers. Its client is never
// started, which is where a client registers its signing interceptor, so upstream's
// CreateTopic reached a broker with access control unsigned and was refused.
func TestAnAdminWithCredentialsSignsItsBrokerRequests(t *testing.T) {
	b := startPatchBroker(t, succeed)
	adm := newPatchAdmin(t, WithCredentials(patchCredentials))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, adm.CreateTopic(ctx, WithTopicCreate("patch-topic"), WithBrokerAddrCreate(b.addr)))

	reqs := b.received()
	require.Len(t, reqs, 1)
	require.Equal(t, internal.ReqCreateTopic, reqs[0].Code)
	requireSigned(t, reqs[0])
}

// Patch 10: CreateTopic returns a broker's refusal; upstream returned nil whatever the
// broker answered.
func TestCreateTopicReturnsTheBrokersRefusal(t *testing.T) {
	b := startPatchBroker(t, func(*remote.RemotingCommand) *remote.RemotingCommand {
		return &remote.RemotingCommand{Code: internal.ResError, Remark: "no permission to create topic"}
	})
	adm := newPatchAdmin(t)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := adm.CreateTopic(ctx, WithTopicCreate("patch-topic"), WithBrokerAddrCreate(b.addr))
	require.Error(t, err)
	require.Contains(t, err.Error(), "no permission to create topic")
}

// Patch 10: GetAllSubscriptionGroup no longer registers the signing interceptor on each call
// (NewAdmin registers it once). Upstream, calls at the same time replaced it while the
// others' requests read it: -race reports that here without the patch.
func TestConcurrentAdminRequestsAreSigned(t *testing.T) {
	b := startPatchBroker(t, func(*remote.RemotingCommand) *remote.RemotingCommand {
		return &remote.RemotingCommand{Code: internal.ResSuccess, Body: []byte(`{"subscriptionGroupTable":{}}`)}
	})
	adm := newPatchAdmin(t, WithCredentials(patchCredentials))

	const calls = 4
	errs := make(chan error, calls)
	for i := 0; i < calls; i++ {
		go func() {
			_, err := adm.GetAllSubscriptionGroup(context.Background(), b.addr, 5*time.Second)
			errs <- err
		}()
	}
	for i := 0; i < calls; i++ {
		require.NoError(t, <-errs)
	}
	reqs := b.received()
	require.Len(t, reqs, calls)
	for _, req := range reqs {
		require.Equal(t, internal.ReqGetAllSubscriptionGroupConfig, req.Code)
		requireSigned(t, req)
	}
}
