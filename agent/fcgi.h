/*
 * fcgi.h - an incremental parser of FastCGI (version 1) as it passes between a web server
 * (nginx's fastcgi_pass, the "client") and an application server (PHP-FPM, the "server"). Both
 * sides use it: the server reads the request direction and writes the response direction, the
 * client the other way round.
 *
 * Rules: pure and allocation-free, no syscalls; the caller owns the state (struct sw_fcgi,
 * ~5 KiB). Bytes are never changed here: the client side's glue inserts one whole PARAMS record
 * (sw_fcgi_params_record) at the offset a SW_FCGI_EV_PARAMS event names, before the empty
 * PARAMS record that ends the stream, so no length field of the application's records changes.
 *
 * Request direction (web server -> application): BEGIN_REQUEST (role, keep-conn), PARAMS
 * name-value pairs (1- or 4-byte lengths, split anywhere across records), STDIN, DATA,
 * ABORT_REQUEST, management records (request id 0, ignored). Response direction: STDOUT (the
 * CGI head is scanned for `Status:` and `Location:`), STDERR (ignored), END_REQUEST. Up to
 * SW_FCGI_REQS requests may be open at once on a connection (multiplexed request ids); the
 * params of one request at a time are captured (a second request's PARAMS interleaved with
 * the first's are framed but not captured: its event has `partial` set).
 */
#ifndef SW_FCGI_H
#define SW_FCGI_H

#include "common.h"

#define SW_FCGI_REQS 4 /* requests open at once per connection */

/* The params captured (each cut to its buffer; `cut` bit set when it was longer). */
enum sw_fcgi_param {
    SW_FCGI_METHOD,      /* REQUEST_METHOD */
    SW_FCGI_URI,         /* REQUEST_URI */
    SW_FCGI_SCRIPT,      /* SCRIPT_NAME */
    SW_FCGI_HOST,        /* HTTP_HOST */
    SW_FCGI_SW8,         /* HTTP_SW8 */
    SW_FCGI_CORRELATION, /* HTTP_SW8_CORRELATION */
    SW_FCGI_SW8X,        /* HTTP_SW8_X */
    SW_FCGI_REMOTE_ADDR, /* REMOTE_ADDR */
    SW_FCGI_REMOTE_PORT, /* REMOTE_PORT */
    SW_FCGI_NPARAMS
};

enum sw_fcgi_ev_kind {
    SW_FCGI_EV_BEGIN,  /* BEGIN_REQUEST (request direction) */
    SW_FCGI_EV_PARAMS, /* the empty PARAMS record ending the stream: params are complete */
    SW_FCGI_EV_ABORT,  /* ABORT_REQUEST */
    SW_FCGI_EV_HEAD,   /* the CGI head of the response ended (status) */
    SW_FCGI_EV_END,    /* END_REQUEST, or the connection ended (sw_fcgi_close: closed) */
    SW_FCGI_EV_STOP,   /* the parser stops following (reason) */
};

struct sw_fcgi_ev {
    enum sw_fcgi_ev_kind kind;
    uint16_t id;   /* request id */
    uint16_t role; /* BEGIN: 1 responder, 2 authorizer, 3 filter */
    bool keep;     /* BEGIN: FCGI_KEEP_CONN */
    /* PARAMS: the captured values (not NUL-terminated; len 0: absent) */
    const char *val[SW_FCGI_NPARAMS];
    uint16_t len[SW_FCGI_NPARAMS];
    uint32_t cut;         /* PARAMS: bit p: value p was longer than kept */
    bool has_sw8;         /* PARAMS: the stream already carries HTTP_SW8 (a proxy passing it on) */
    bool partial;         /* PARAMS: this request's params were not captured (interleaved) */
    uint64_t insert_off;  /* PARAMS: stream offset of the empty PARAMS record's first byte */
    int status;           /* HEAD, END: the response's status (Status:, 302 for a Location, 200) */
    bool head_seen;       /* END: the response's CGI head ended */
    uint32_t app_status;  /* END */
    uint8_t proto_status; /* END: 0 REQUEST_COMPLETE */
    bool closed;          /* END: the connection ended first */
    uint64_t user;        /* what the callback returned for this request's BEGIN or PARAMS */
    const char *reason;   /* STOP; END (closed) of a request the parser gave up on: why */
};

/* Called for every event; the value returned for BEGIN is kept for the request and comes
 * back in the `user` of its PARAMS event, and the one returned for PARAMS replaces it (later
 * events: HEAD, ABORT, END). */
typedef uint64_t (*sw_fcgi_cb)(void *ctx, const struct sw_fcgi_ev *ev);

/* One direction's record framing (internal). */
struct sw_fcgi_dir {
    uint8_t hdr[8];
    uint8_t hdr_n;
    uint8_t small_n; /* bytes of a BEGIN/END body kept */
    uint8_t small[8];
    uint16_t clen; /* content bytes left of the current record */
    uint8_t pad;   /* padding bytes left */
    uint8_t type;
    uint16_t id;
    uint64_t off;     /* stream bytes seen */
    uint64_t rec_off; /* stream offset of the current record */
};

/* A request open on the connection (internal). */
struct sw_fcgi_req {
    uint16_t id;
    bool used;
    bool params_done;
    bool head_done;
    bool location;
    uint8_t line_n;
    uint16_t status;
    uint64_t user;
    char line[24]; /* the start of the current line of the CGI head */
};

struct sw_fcgi {
    bool stopped;
    /* PARAMS capture, for one request at a time (cap_id; cap_on) */
    bool cap_on;
    uint16_t cap_id;
    uint8_t pst;  /* pair state: name length, value length, name, value */
    uint8_t lb_n; /* length bytes read */
    uint8_t lb[4];
    uint32_t nlen, vlen, nleft, vleft;
    int8_t target; /* the param the current value goes to, -1 none */
    uint8_t name_n;
    bool has_sw8;
    char name[24];
    uint32_t cut;
    uint16_t len[SW_FCGI_NPARAMS];
    char method[16], uri[1024], script[256], host[256], sw8[2048], corr[1024], sw8x[16], raddr[64],
        rport[8];
    struct sw_fcgi_dir dir[2]; /* [0] request direction, [1] response direction */
    struct sw_fcgi_req req[SW_FCGI_REQS];
};

void sw_fcgi_init(struct sw_fcgi *f);

/* Feeds bytes of the request direction (`response` false) or the response direction. */
void sw_fcgi_feed(struct sw_fcgi *f, bool response, const uint8_t *p, size_t n, sw_fcgi_cb cb,
                  void *ctx);

/* The connection ended: an END (closed) for each open request. */
void sw_fcgi_close(struct sw_fcgi *f, sw_fcgi_cb cb, void *ctx);

bool sw_fcgi_stopped(const struct sw_fcgi *f);

/* In a child after fork: the open requests keep no span value (the parent's). */
void sw_fcgi_forget_spans(struct sw_fcgi *f);

/*
 * Writes one PARAMS record of request `id` carrying the header lines in `lines` (`name: value`
 * CRLF-terminated, as sw_trace_exit_start writes them) as CGI params: sw8 -> HTTP_SW8,
 * sw8-correlation -> HTTP_SW8_CORRELATION, any name -> HTTP_ upper-cased, '-' as '_'. Returns
 * the record's length, 0 when it does not fit in `cap` or there is nothing to carry.
 */
size_t sw_fcgi_params_record(uint8_t *out, size_t cap, uint16_t id, const char *lines, size_t n);

#endif /* SW_FCGI_H */
