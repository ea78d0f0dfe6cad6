"""A small HTTP server on 127.0.0.1 for tests that stand in for a package index or its file host."""

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn


class Server(ThreadingMixIn, HTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # the client hung up (pip killed at its deadline)


def serve(routes):
    """Start a server whose every GET is answered by ``routes(handler)`` -> (code, body, headers);
    returns (server, "http://127.0.0.1:PORT", the paths asked, in order). Stop it with
    ``server.shutdown(); server.server_close()``."""
    log = []

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            log.append(self.path)
            code, body, headers = routes(self)
            self.send_response(code)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = Server(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, "http://127.0.0.1:%d" % srv.server_address[1], log
