/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vccl-telemetry serve: the rings of this user as Prometheus text on /metrics (metrics.h), over
 * libmicrohttpd. One internal polling thread answers every connection: scrapes run one at a time (each
 * reads every ring afresh, nothing is cached), a slow client only holds its own connection until the
 * timeout, and the connection count is capped. Built without libmicrohttpd, only --print works.
 */
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/clock.h"
#include "tools/telemetry/metrics.h"
#include "tools/telemetry/tool.h"

#if VCCL_HAVE_MICROHTTPD
#include <microhttpd.h>
#endif

namespace vtel {

namespace {

struct ServeOptions {
    std::string listen = "127.0.0.1:9478";
    std::string dir = "/dev/shm";
    MetricsOptions metrics;
    int max_connections = 32;
    int timeout_s = 10;
    bool print = false;
    RingCache* cache = nullptr; // the server's: rings stay mapped between scrapes (one scrape at a time)
};

int usage_error(const char* what) {
    fprintf(stderr, "vccl-telemetry serve: %s\n"
                    "usage: vccl-telemetry serve [--listen ADDR:PORT] [--job NAME] [--dir DIR] [--max-peers N]\n"
                    "                            [--max-connections N] [--timeout SECONDS] [--print]\n", what);
    return 2;
}

bool parse_count(const char* s, long lo, long hi, int* out) {
    char* end = nullptr;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
    *out = int(v);
    return true;
}

std::string scrape_text(const ServeOptions& o) {
    ScrapeInput in = read_scrape(o.dir, o.cache);
    return render_metrics(in, o.metrics, vccl::now_ns());
}

#if VCCL_HAVE_MICROHTTPD

const char* const kIndex = "vccl-telemetry serve: Prometheus metrics of the vccl telemetry rings at /metrics\n";

MHD_Result respond(MHD_Connection* connection, unsigned int code, const std::string& body, const char* type,
                   bool allow_header) {
    MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
    if (r == nullptr) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    if (allow_header) MHD_add_response_header(r, "Allow", "GET, HEAD");
    MHD_Result ret = MHD_queue_response(connection, code, r);
    MHD_destroy_response(r);
    return ret;
}

MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url, const char* method, const char* version,
                      const char* upload_data, size_t* upload_data_size, void** con_cls) {
    (void)version;
    (void)upload_data;
    const ServeOptions& o = *static_cast<const ServeOptions*>(cls);
    const bool get = strcmp(method, "GET") == 0, head = strcmp(method, "HEAD") == 0;
    if (*con_cls == nullptr) {
        static int marker;
        *con_cls = &marker; // the headers are in: answer on this call, whatever body follows is discarded
    }
    *upload_data_size = 0;
    if (!get && !head) return respond(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n", "text/plain", true);
    if (strcmp(url, "/metrics") == 0) {
        return respond(connection, MHD_HTTP_OK, scrape_text(o), "text/plain; version=0.0.4; charset=utf-8", false);
    }
    if (strcmp(url, "/") == 0) return respond(connection, MHD_HTTP_OK, kIndex, "text/plain", false);
    return respond(connection, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n", "text/plain", false);
}

int run_server(ServeOptions& o) {
    std::string host = o.listen, port;
    size_t colon = host.rfind(':');
    if (colon == std::string::npos) return usage_error("--listen wants ADDR:PORT");
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (host.empty()) host = "127.0.0.1";
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    struct addrinfo* ai = nullptr;
    int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &ai);
    if (rc != 0 || ai == nullptr) {
        fprintf(stderr, "vccl-telemetry serve: cannot use %s: %s\n", o.listen.c_str(), gai_strerror(rc));
        return 2;
    }
    // SIGINT and SIGTERM wait for sigwait below: blocked before the server thread starts, so it inherits that.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    signal(SIGPIPE, SIG_IGN); // a client that goes away mid-answer
    RingCache cache;
    o.cache = &cache;
    unsigned int flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    MHD_Daemon* d = MHD_start_daemon(
        flags, 0, nullptr, nullptr, &on_request, &o, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)o.max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned int)o.max_connections, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)o.timeout_s, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (d == nullptr) {
        fprintf(stderr, "vccl-telemetry serve: cannot listen on %s (address in use, or not this host's?)\n",
                o.listen.c_str());
        return 1;
    }
    const union MHD_DaemonInfo* info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("vccl-telemetry serve: listening on %s:%u, /metrics, rings in %s\n", host.c_str(),
           info != nullptr ? unsigned(info->port) : 0u, o.dir.c_str());
    fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    MHD_stop_daemon(d);
    return 0;
}

#else

int run_server(ServeOptions& o) {
    (void)o;
    fprintf(stderr, "vccl-telemetry serve: this build has no HTTP server (configure found no libmicrohttpd; Debian: "
                    "apt-get install libmicrohttpd-dev, then configure again); --print still works\n");
    return 3;
}

#endif

} // namespace

int cmd_serve(int argc, char** argv) {
    ServeOptions o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](const char* name) -> const char* {
            if (i + 1 >= argc) return nullptr;
            (void)name;
            return argv[++i];
        };
        const char* v = nullptr;
        if (a == "--print") {
            o.print = true;
        } else if (a == "-h" || a == "--help") {
            usage_error("prints the vccl telemetry rings of this user as Prometheus text (vccl-telemetry(1))");
            return 0;
        } else if (a == "--listen" || a == "--job" || a == "--dir" || a == "--max-peers" || a == "--max-connections" ||
                   a == "--timeout") {
            if ((v = value(a.c_str())) == nullptr) return usage_error((a + " needs a value").c_str());
            if (a == "--listen") o.listen = v;
            else if (a == "--job") o.metrics.job = v;
            else if (a == "--dir") o.dir = v;
            else if (a == "--max-peers" && !parse_count(v, 0, 1 << 20, &o.metrics.max_peers))
                return usage_error("--max-peers wants 0 .. 1048576");
            else if (a == "--max-connections" && !parse_count(v, 1, 1024, &o.max_connections))
                return usage_error("--max-connections wants 1 .. 1024");
            else if (a == "--timeout" && !parse_count(v, 1, 3600, &o.timeout_s))
                return usage_error("--timeout wants 1 .. 3600 seconds");
        } else {
            return usage_error(("unknown option '" + a + "'").c_str());
        }
    }
    if (o.print) {
        std::string text = scrape_text(o);
        fwrite(text.data(), 1, text.size(), stdout);
        return 0;
    }
    return run_server(o);
}

} // namespace vtel
