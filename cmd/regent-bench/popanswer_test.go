package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPopAnswerReadsTheConsumerFieldsOfEveryMessage(t *testing.T) {
	body := []byte(` {"success":true,"queue":"q","partition":"p\u00e9","partitionId":"pid","leaseId":"L",
		"partitionsClaimed":1,"messages":[
		{"id":"a","transactionId":"t\"a","traceId":null,"data":{"x":[1,2.5e3,-3,{"y":"}]"}],"z":true,"n":null},
		 "producerSub":null,"createdAt":"2026","partitionId":"pid","partition":"p","leaseId":"L","consumerGroup":"g"},
		{"data":"s","id":"b","transactionId":"tb","partitionId":"pid2"}]} `)
	var a popAnswer
	require.NoError(t, a.parse(body))
	require.Equal(t, "pé", string(a.Partition))
	require.Equal(t, "pid", string(a.PartitionID))
	require.Equal(t, "L", string(a.LeaseID))
	require.Len(t, a.Messages, 2)
	require.Equal(t, popMessage{[]byte("a"), []byte(`t"a`), []byte("pid")}, a.Messages[0])
	require.Equal(t, popMessage{[]byte("b"), []byte("tb"), []byte("pid2")}, a.Messages[1])

	require.NoError(t, a.parse([]byte(`{"messages":[]}`)))
	require.Empty(t, a.Messages, "a parse starts afresh")
}

func TestPopAnswerRefusesWhatIsNotAPopAnswer(t *testing.T) {
	for _, body := range []string{
		``, `[]`, `{"messages":[{"id":"a"}`, `{"messages":[{"id":"a"},]}`, `{"messages":[{"data":1}]}`,
		`{"messages":[{"id":"a","data":tru}]}`, `{"leaseId":"a} `, `{"a":1} x`, `{"a" 1}`,
	} {
		var a popAnswer
		require.ErrorIs(t, a.parse([]byte(body)), errPopAnswer, body)
	}
}

func TestAppendJSONStringEncodesLikeEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\`, "é\u001f\n"} {
		var back string
		require.NoError(t, json.Unmarshal(appendJSONString(nil, s), &back))
		require.Equal(t, s, back)
	}
}

func TestSucceededReadsTheSuccessMember(t *testing.T) {
	for body, want := range map[string]bool{
		`{"success":true,"query_id":"q"}`:                   true,
		`{"query_id":"q","push_results":[],"success":true}`: true,
		`{"success":false,"error":"invalid lease"}`:         false,
		`{"error":"success"}`:                               false,
	} {
		got, err := succeeded([]byte(body))
		require.NoError(t, err, body)
		require.Equal(t, want, got, body)
	}
	_, err := succeeded([]byte(`{"success":tru}`))
	require.ErrorIs(t, err, errPopAnswer)
}

func TestHasStrSpecialAgreesWithTheTableInEveryLane(t *testing.T) {
	for lane := range 8 {
		for c := range 256 {
			for _, fill := range []byte{'x', 0xff} {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[lane] = byte(c)
				require.Equal(t, strSpecial[c], hasStrSpecial(binary.LittleEndian.Uint64(w[:])), "byte %#x in lane %d", c, lane)
			}
		}
	}
}

func TestPopAnswerFindsTheEndOfStringsOfEveryLength(t *testing.T) {
	for n := range 40 {
		v := strings.Repeat("é", n/2) + strings.Repeat("v", n%2)
		var a popAnswer
		require.NoError(t, a.parse([]byte(`{"leaseId":"`+v+`","partition":"p"}`)), n)
		require.Equal(t, v, string(a.LeaseID))
		require.Equal(t, "p", string(a.Partition))
		require.ErrorIs(t, a.parse([]byte(`{"leaseId":"`+v+"\x01"+v+`"}`)), errPopAnswer, "a control character after %d bytes", len(v))
	}
}

func BenchmarkPopAnswerParse100(b *testing.B) {
	var body bytes.Buffer
	body.WriteString(`{"success":true,"queue":"bench","partition":"p1","partitionId":"0195d2a4-8f3e-7c1a-9b2d-4e5f6a7b8c9d","leaseId":"0195d2a4-8f3e-7c1a-9b2d-4e5f6a7b8c9e","messages":[`)
	for i := range 100 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"id":"0195d2a4-8f3e-7c1a-9b2d-%012d","transactionId":"0195d2a4-8f3e-7c1a-9b2d-%012d","partitionId":"0195d2a4-8f3e-7c1a-9b2d-4e5f6a7b8c9d","data":{"i":%d,"pad":"%s"},"traceId":null,"producerSub":null,"createdAt":"2026-11-30T01:02:03.456Z","queue":"bench","partition":"p1","leaseId":"0195d2a4-8f3e-7c1a-9b2d-4e5f6a7b8c9e","consumerGroup":"g"}`, i, i, i, strings.Repeat("x", 40))
	}
	body.WriteString(`]}`)
	b.SetBytes(int64(body.Len()))
	var a popAnswer
	for b.Loop() {
		if err := a.parse(body.Bytes()); err != nil || len(a.Messages) != 100 {
			b.Fatal(err, len(a.Messages))
		}
	}
}
