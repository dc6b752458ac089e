package dev.capgate.upstream;

import java.util.Base64;

/** Strict unpadded base64url (RFC 7515 §2): no padding, no whitespace, no other alphabet. */
final class Base64Url {
  static final class Malformed extends Exception {
    private static final long serialVersionUID = 1L;

    Malformed() {
      super("invalid base64url", null, false, false);
    }
  }

  private Base64Url() {}

  static byte[] decode(String s) throws Malformed {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      boolean ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
      if (!ok) {
        throw new Malformed(); // the JDK decoder would accept '=' padding
      }
    }
    if (s.length() % 4 == 1) {
      throw new Malformed();
    }
    return Base64.getUrlDecoder().decode(s);
  }
}
