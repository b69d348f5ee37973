package main

import (
	"encoding/json"
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
