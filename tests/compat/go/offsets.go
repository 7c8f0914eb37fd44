package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// The offsets a broker holds for a group, asked with QUERY_CONSUMER_OFFSET on a connection of
// the driver's own, beside the client under test.
//
// Why the driver asks: the client's Shutdown writes its consumer's offsets (UPDATE_CONSUMER_OFFSET,
// which it sends without the oneway flag, so the broker answers each) and closes its
// connections at once. A socket closed while answers sit unread in it is reset, not closed:
// Linux sends an RST and drops whatever the socket had not yet sent, so the last offsets
// written before Shutdown's close may never leave the client (seen as a broker holding 4 of a
// queue's 5 messages committed, about one run in fifty over TLS). A scenario therefore commits
// first, on connections that stay open, and waits until the brokers hold what it committed.

const (
	queryConsumerOffset = 14
	maxFrameBytes       = 16 << 20 // the brokers' own limit: a longer length is garbage
)

// brokers is --brokers: broker name → address, "broker-a=127.0.0.1:1234,broker-b=…"; empty
// without the option (the scenario then does not ask the brokers).
func (d *driver) brokers() map[string]string {
	addresses := map[string]string{}
	for _, pair := range strings.Split(d.options["brokers"], ",") {
		if name, address, ok := strings.Cut(pair, "="); ok {
			addresses[name] = address
		}
	}
	return addresses
}

// brokerOffset is the offset the broker at address holds for the group on mq; -1 when it holds
// none.
func (d *driver) brokerOffset(address, group string, mq primitive.MessageQueue) (int64, error) {
	fields := map[string]string{
		"consumerGroup": group,
		"topic":         mq.Topic,
		"queueId":       strconv.Itoa(mq.QueueId),
	}
	header, err := d.request(address, queryConsumerOffset, fields)
	if err != nil {
		return 0, err
	}
	switch header.Code {
	case 0:
		return strconv.ParseInt(header.ExtFields["offset"], 10, 64)
	case 22: // QUERY_NOT_FOUND
		return -1, nil
	default:
		return 0, fmt.Errorf("%s: code %d: %s", address, header.Code, header.Remark)
	}
}

type remotingHeader struct {
	Code      int               `json:"code"`
	Language  string            `json:"language"`
	Version   int               `json:"version"`
	Opaque    int               `json:"opaque"`
	Flag      int               `json:"flag"`
	Remark    string            `json:"remark,omitempty"`
	ExtFields map[string]string `json:"extFields"`
}

// request sends one JSON-coded request on a new connection (over TLS and signed as the
// client's are) and returns the answer's header.
func (d *driver) request(address string, code int, fields map[string]string) (*remotingHeader, error) {
	if credentials, ok := d.credentials(); ok {
		fields["AccessKey"] = credentials.AccessKey
		fields["Signature"] = signature(fields, credentials.SecretKey)
	}
	header, err := json.Marshal(remotingHeader{Code: code, Language: "GO", Version: 317, Opaque: 1, ExtFields: fields})
	if err != nil {
		return nil, err
	}
	dialer := &net.Dialer{Timeout: 3 * time.Second}
	var conn net.Conn
	if d.tls() {
		conn, err = tls.DialWithDialer(dialer, "tcp", address, &tls.Config{InsecureSkipVerify: true})
	} else {
		conn, err = dialer.Dial("tcp", address)
	}
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(3 * time.Second)); err != nil {
		return nil, err
	}
	frame := make([]byte, 8, 8+len(header))
	binary.BigEndian.PutUint32(frame[0:4], uint32(4+len(header)))
	binary.BigEndian.PutUint32(frame[4:8], uint32(len(header))) // serialize type 0: JSON
	if _, err := conn.Write(append(frame, header...)); err != nil {
		return nil, err
	}
	var lengths [8]byte
	if _, err := io.ReadFull(conn, lengths[:]); err != nil {
		return nil, err
	}
	total := binary.BigEndian.Uint32(lengths[0:4])
	headerLength := binary.BigEndian.Uint32(lengths[4:8]) & 0xFFFFFF
	if total < 4 || total > maxFrameBytes || headerLength > total-4 {
		return nil, fmt.Errorf("%s: a frame of %d bytes with a header of %d", address, total, headerLength)
	}
	rest := make([]byte, total-4)
	if _, err := io.ReadFull(conn, rest); err != nil {
		return nil, err
	}
	var answer remotingHeader
	if err := json.Unmarshal(rest[:headerLength], &answer); err != nil {
		return nil, err
	}
	return &answer, nil
}

// signature is RocketMQ's ACL signature of a body-less request: Base64(HMAC-SHA1(secret key,
// the ext fields' values in the order of their sorted names)).
func signature(fields map[string]string, secretKey string) string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		if name != "Signature" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var content bytes.Buffer
	for _, name := range names {
		content.WriteString(fields[name])
	}
	mac := hmac.New(sha1.New, []byte(secretKey))
	mac.Write(content.Bytes())
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
